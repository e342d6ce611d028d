//! `hookflow`: the command-line client for CI pipelines and scripts. Runs flows (here, or on the organization's
//! runners), manages flows, API keys and webhooks, and tails or forwards captures. `main` parses the command line and
//! maps every failure to a documented exit code.

pub mod api;
pub mod code;
pub mod commands;
pub mod config;
pub mod error;
pub mod output;
pub mod run;
pub mod sse;

use clap::{Parser, Subcommand};
use commands::flows::FlowsCommand;
use commands::keys::KeysCommand;
use commands::webhooks::WebhooksCommand;
use config::CredentialArgs;
use error::CliError;
use output::Style;
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Credentials come from SERVICE_URL (default http://127.0.0.1:8080), SERVICE_API_KEY and SERVICE_ORGANIZATION_ID,
or from --url, --api-key and --organization-id. The key is never printed.

Exit codes:
  0  every flow passed (or the command succeeded)
  1  a flow failed, errored, was cancelled or timed out
  2  usage or configuration error (bad flags, a missing variable, nothing selected)
  3  network or runtime error (the server could not be reached, a report could not be written)
  4  the server refused the request (authentication, scope, not found, invalid input)

Examples:
  hookflow run flows/checkout.json flows/payments/ --report junit=reports/hookflow.xml
  hookflow run --tag smoke --env staging --report junit=reports/hookflow.xml
  hookflow apply flows/ --plan
  hookflow export --all flows/
  hookflow run --flow 0190a3c2-... --mode remote --label eu-west
  hookflow collections sync 0190b1d4-... --file openapi.yaml --preview
  hookflow webhooks tail 8c0e... --json
  hookflow webhooks forward 8c0e... --to http://localhost:3000/hooks";

#[derive(Debug, Parser)]
#[command(name = "hookflow", version, about = "hookflow CLI: run API flows from CI, manage keys, tail and forward webhooks.",
    after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    credentials: CredentialArgs,
    /// No colours (also when NO_COLOR is set or the output is not a terminal).
    #[arg(long, global = true)]
    no_color: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run flow files or folders, or stored flows by id or tag, and wait for them: exit 0 when all pass, 1 when
    /// one does not.
    #[command(after_help = AFTER_HELP)]
    Run(run::RunArgs),
    /// Make the organization's flows match a folder of flow files, by key (`--plan` only shows what would change).
    Apply(code::apply::ApplyArgs),
    /// Write every flow that has a key to a folder, one `<key>.json` each, in the layout `apply` reads.
    Export(code::export::ExportArgs),
    /// Flows: list, get, export, import, publish.
    #[command(subcommand)]
    Flows(FlowsCommand),
    /// Collections: list, import an OpenAPI description, sync with it.
    #[command(subcommand)]
    Collections(commands::collections::CollectionsCommand),
    /// Import a file of another tool (Postman, Insomnia, HAR, curl, OpenAPI/Swagger 2.0) as a collection, and with
    /// --flow a flow of its requests; prints what was not converted.
    Import(commands::import::ImportArgs),
    /// API keys: create, list, delete, rotate.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Webhook endpoints: create, list, tail, forward.
    #[command(subcommand)]
    Webhooks(WebhooksCommand),
    /// Destinations of an endpoint: list, create, delete, replay dead deliveries.
    #[command(subcommand)]
    Destinations(commands::destinations::DestinationsCommand),
}

async fn dispatch(cli: Cli, style: Style) -> Result<ExitCode, CliError> {
    let api = api::Api::new(cli.credentials.resolve()?)?;
    match cli.command {
        Command::Run(args) => return run::run(api, args, style).await,
        Command::Apply(args) => code::apply::run(&api, args).await?,
        Command::Export(args) => code::export::run(&api, args).await?,
        Command::Flows(command) => commands::flows::run(&api, command).await?,
        Command::Collections(command) => commands::collections::run(&api, command, style).await?,
        Command::Import(args) => commands::import::run(&api, args).await?,
        Command::Keys(command) => commands::keys::run(&api, command).await?,
        Command::Webhooks(command) => commands::webhooks::run(&api, command, style).await?,
        Command::Destinations(command) => commands::destinations::run(&api, command).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The whole program: parse, run, print the error on one line, answer the exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let style = Style::detect(cli.no_color);
    // One thread: a run is a chain of waits (request, answer, report), and handing each wake-up to another worker
    // cost more than the work; heavy evaluations still go to the blocking pool.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("hookflow: cannot start the async runtime: {e}");
            return ExitCode::from(error::code::RUNTIME);
        }
    };
    match runtime.block_on(dispatch(cli, style)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hookflow: {}", style.paint(&e.to_string(), output::Tone::Bad));
            e.exit_code()
        }
    }
}
