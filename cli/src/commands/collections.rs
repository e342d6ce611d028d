//! `hookflow collections list|import|sync`: import an OpenAPI description as a collection, and keep it in sync from
//! CI (preview the diff, or apply it).

use crate::api::Api;
use crate::error::CliError;
use crate::output::{Style, Tone, print_json, print_list};
use clap::{Args, Subcommand};
use hookflow_shared::CollectionId;
use hookflow_shared::api::collections::{
    Collection, ImportOpenApi, ImportedCollection, OpenApiSource, PutOpenApiSync, SyncApplied, SyncDiff, SyncItem,
};
use reqwest::Method;
use std::io::Read as _;
use std::path::PathBuf;

/// Where an OpenAPI description comes from.
#[derive(Debug, Args)]
#[group(multiple = false)]
pub struct SourceArgs {
    /// A JSON or YAML file (`-` for standard input), sent as the document.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// A URL the server fetches the description from.
    #[arg(long = "source-url", value_name = "URL")]
    source_url: Option<String>,
}

impl SourceArgs {
    fn source(&self) -> Result<Option<OpenApiSource>, CliError> {
        if let Some(url) = &self.source_url {
            return Ok(Some(OpenApiSource { url: Some(url.clone()), document: None }));
        }
        let Some(file) = &self.file else { return Ok(None) };
        let mut text = String::new();
        if file.as_os_str() == "-" {
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| CliError::usage(format!("cannot read standard input: {e}")))?;
        } else {
            text = std::fs::read_to_string(file)
                .map_err(|e| CliError::usage(format!("cannot read {}: {e}", file.display())))?;
        }
        Ok(Some(OpenApiSource { url: None, document: Some(text) }))
    }
}

#[derive(Debug, Subcommand)]
pub enum CollectionsCommand {
    /// List collections.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Import an OpenAPI 3.0 or 3.1 description as a new collection.
    Import {
        #[command(flatten)]
        source: SourceArgs,
        /// The collection's name (default: the description's title).
        #[arg(long)]
        name: Option<String>,
    },
    /// Sync a collection with its OpenAPI description: with --file or --source-url, that becomes its source first.
    Sync {
        id: CollectionId,
        #[command(flatten)]
        source: SourceArgs,
        /// Only show what would change.
        #[arg(long)]
        preview: bool,
        /// Delete requests whose operation left the description (default: keep them, deprecated).
        #[arg(long)]
        delete_removed: bool,
        #[arg(long)]
        json: bool,
    },
}

fn show_diff(diff: &SyncDiff, style: Style) {
    let line = |mark: &str, tone: Tone, item: &SyncItem| {
        let changes = if item.changes.is_empty() { String::new() } else { format!(" [{}]", item.changes.join(", ")) };
        println!("{} {} ({}){changes}", style.paint(mark, tone), item.operation_key, item.name);
    };
    diff.added.iter().for_each(|i| line("+", Tone::Good, i));
    diff.modified.iter().for_each(|i| line("~", Tone::Warn, i));
    diff.removed.iter().for_each(|i| line("-", Tone::Bad, i));
    println!(
        "{} added, {} modified, {} removed, {} unchanged (description sha256 {})",
        diff.added.len(),
        diff.modified.len(),
        diff.removed.len(),
        diff.unchanged.len(),
        diff.document_sha256
    );
    for warning in &diff.warnings {
        eprintln!("warning: {warning}");
    }
}

pub async fn run(api: &Api, command: CollectionsCommand, style: Style) -> Result<(), CliError> {
    match command {
        CollectionsCommand::List { json } => {
            let collections: Vec<Collection> = api.list_all("/collections", &[]).await?;
            print_list(json, &collections, &["ID", "NAME", "REQUESTS"], |c| {
                vec![c.id.to_string(), c.name.clone(), c.request_count.to_string()]
            });
        }
        CollectionsCommand::Import { source, name } => {
            let source = source.source()?.ok_or_else(|| CliError::usage("give --file or --source-url"))?;
            let imported: ImportedCollection = api
                .post(
                    "/collections/import/openapi",
                    &ImportOpenApi { name: name.map(|n| CliError::option("--name", n)).transpose()?, source },
                )
                .await?;
            let summary = &imported.summary;
            println!(
                "imported collection {} ({}): {} requests in {} folders",
                imported.collection.collection.id,
                imported.collection.collection.name,
                summary.requests,
                summary.folders
            );
            for warning in &summary.warnings {
                eprintln!("warning: {warning}");
            }
        }
        CollectionsCommand::Sync { id, source, preview, delete_removed, json } => {
            let path = format!("/collections/{id}/openapi-sync");
            if let Some(source) = source.source()? {
                let request = api.request(Method::PUT, &path).json(&PutOpenApiSync { source, delete_removed });
                api.send_raw(request).await?;
            } else if delete_removed {
                return Err(CliError::usage(
                    "--delete-removed goes with --file or --source-url (it is part of the source)",
                ));
            }
            if preview {
                let diff: SyncDiff = api.post(&format!("{path}/preview"), &serde_json::json!({})).await?;
                if json { print_json(&diff) } else { show_diff(&diff, style) }
            } else {
                let applied: SyncApplied = api.post(&path, &serde_json::json!({})).await?;
                if json {
                    print_json(&applied);
                } else {
                    show_diff(&applied.diff, style);
                    println!("synced at {}; {} deleted", applied.synced_at, applied.deleted);
                }
            }
        }
    }
    Ok(())
}
