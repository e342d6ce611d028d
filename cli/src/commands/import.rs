//! `hookflow import postman|insomnia|har|curl|openapi FILE [--flow NAME]`: a file of another tool imported as a
//! collection (and a flow of its requests), with the conversion report printed: converted test lines, the lines
//! that were not converted with their place, and warnings.

use crate::api::Api;
use crate::error::CliError;
use crate::output::print_json;
use clap::{Args, ValueEnum};
use hookflow_shared::FlowId;
use hookflow_shared::api::collections::OpenApiSource;
use hookflow_shared::api::imports::{ImportAnswer, ImportDocument, ImportFlowName, ImportFormat};
use std::io::Read as _;
use std::path::PathBuf;

/// What the file is.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Kind {
    /// A Postman collection (v2.0 or v2.1) or environment.
    Postman,
    /// An Insomnia v4 export (JSON or YAML).
    Insomnia,
    /// A HAR file saved by a browser.
    Har,
    /// curl command lines.
    Curl,
    /// An OpenAPI 3.x or Swagger 2.0 description.
    Openapi,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    kind: Kind,
    /// The file (`-` for standard input).
    file: PathBuf,
    /// Also make a flow of the requests in order, named so.
    #[arg(long, value_name = "NAME")]
    flow: Option<String>,
    /// A Postman environment: write it as this flow's environment instead of a collection.
    #[arg(long, value_name = "FLOW_ID", conflicts_with = "flow")]
    flow_id: Option<FlowId>,
    /// The collection's name (default: the document's own).
    #[arg(long)]
    name: Option<String>,
    /// Only show what would be imported.
    #[arg(long)]
    preview: bool,
    /// Print the whole answer as JSON.
    #[arg(long)]
    json: bool,
}

/// The server's limit for an imported document: a larger file is refused here, before it is read whole or sent.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

fn read(file: &PathBuf) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    // One byte past the limit tells a file that is too big without reading the rest of it.
    let read = if file.as_os_str() == "-" {
        std::io::stdin()
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::usage(format!("cannot read standard input: {e}")))
    } else {
        std::fs::File::open(file)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", file.display())))
    };
    read?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(CliError::usage(format!("{} is larger than 10 MiB, the limit of an import", file.display())));
    }
    String::from_utf8(bytes).map_err(|_| CliError::usage(format!("{} is not UTF-8 text", file.display())))
}

pub async fn run(api: &Api, args: ImportArgs) -> Result<(), CliError> {
    // Postman and OpenAPI files say which kind they are (collection or environment; 3.x or Swagger 2.0).
    let format = match args.kind {
        Kind::Postman | Kind::Openapi => None,
        Kind::Insomnia => Some(ImportFormat::Insomnia),
        Kind::Har => Some(ImportFormat::Har),
        Kind::Curl => Some(ImportFormat::Curl),
    };
    let body = ImportDocument {
        name: args.name.map(|n| CliError::option("--name", n)).transpose()?,
        format,
        source: OpenApiSource { url: None, document: Some(read(&args.file)?) },
        flow: args.flow.map(|n| CliError::option("--flow", n)).transpose()?.map(|name| ImportFlowName { name }),
        flow_id: args.flow_id,
    };
    let path = if args.preview { "/collections/import/preview" } else { "/collections/import" };
    let answer: ImportAnswer = api.post(path, &body).await?;
    if args.json {
        print_json(&answer);
        return Ok(());
    }
    let verb = if args.preview { "would import" } else { "imported" };
    if let Some(collection) = &answer.collection {
        println!(
            "{verb} collection {} ({}): {} requests in {} folders",
            collection.collection.id, collection.collection.name, answer.summary.requests, answer.summary.folders
        );
    }
    if let Some(flow) = &answer.flow {
        let id = flow.id.map_or_else(|| "(not stored)".to_owned(), |id| id.to_string());
        match &flow.environment {
            Some(key) => println!("{verb} environment {key} of flow {id} ({})", flow.name),
            None => println!("{verb} flow {id} ({})", flow.name),
        }
    }
    let report = &answer.report;
    println!("{} test lines converted, {} lines not converted", report.converted, report.not_converted.len());
    for line in &report.not_converted {
        println!("  {}:{}: {}", line.place, line.line, line.text);
    }
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(())
}
