//! `hookflow flows list|get|export|import|publish`.

use crate::api::Api;
use crate::error::CliError;
use crate::output::{print_json, print_list};
use clap::Subcommand;
use hookflow_shared::FlowId;
use hookflow_shared::api::flows::{Flow, FlowDocument, FlowVersion, Publish};
use std::io::Read as _;
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum FlowsCommand {
    /// List flows (id, name, tags, published version, last status).
    List {
        /// Only flows carrying this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print one flow as JSON.
    Get { id: FlowId },
    /// Write a flow's self-contained export document (versions and environments; never secret values).
    Export {
        id: FlowId,
        /// File to write; standard output without it.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Create a flow from an export document (a file, or `-` for standard input).
    Import { file: PathBuf },
    /// Publish the flow's current draft as a new version.
    Publish {
        id: FlowId,
        /// What changed, kept with the version.
        #[arg(long)]
        note: Option<String>,
    },
}

fn read_input(file: &PathBuf) -> Result<String, CliError> {
    if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| CliError::usage(format!("cannot read standard input: {e}")))?;
        return Ok(text);
    }
    std::fs::read_to_string(file).map_err(|e| CliError::usage(format!("cannot read {}: {e}", file.display())))
}

pub async fn run(api: &Api, command: FlowsCommand) -> Result<(), CliError> {
    match command {
        FlowsCommand::List { tag, json } => {
            let query: Vec<(&str, &str)> = tag.as_deref().map(|t| ("tag", t)).into_iter().collect();
            let flows: Vec<Flow> = api.list_all("/flows", &query).await?;
            print_list(json, &flows, &["ID", "NAME", "TAGS", "PUBLISHED", "LAST STATUS"], |f| {
                vec![
                    f.id.to_string(),
                    f.name.clone(),
                    f.tags.join(","),
                    f.published_version.map_or_else(|| "-".to_owned(), |v| v.to_string()),
                    f.last_status.map_or_else(|| "-".to_owned(), |s| s.as_str().to_owned()),
                ]
            });
        }
        FlowsCommand::Get { id } => print_json(&api.client().flows().get(id).await.map_err(|e| api.error(e))?),
        FlowsCommand::Export { id, output } => {
            let document: FlowDocument = api.client().flows().export(id).await.map_err(|e| api.error(e))?;
            let text = serde_json::to_string_pretty(&document)
                .map_err(|e| CliError::runtime(format!("cannot encode the export: {e}")))?;
            match output {
                Some(path) => {
                    std::fs::write(&path, text + "\n")
                        .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
                    eprintln!("exported flow {id} to {}", path.display());
                }
                None => println!("{text}"),
            }
        }
        FlowsCommand::Import { file } => {
            let text = read_input(&file)?;
            let document: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CliError::usage(format!("{} is not JSON: {e}", file.display())))?;
            let flow: Flow = api.post("/flows/import", &document).await?;
            println!("imported flow {} ({})", flow.id, flow.name);
        }
        FlowsCommand::Publish { id, note } => {
            let note = note.map(|n| CliError::option("--note", n)).transpose()?;
            let version: FlowVersion =
                api.client().flows().publish(id, &Publish { note }).await.map_err(|e| api.error(e))?;
            println!("published version {} of flow {id}", version.version);
        }
    }
    Ok(())
}
