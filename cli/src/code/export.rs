//! `hookflow export --all DIR`: one `<key>.json` per flow that has a key, in the layout `apply` reads (a flow
//! object `{"key", "name", "description", "tags", "definition"}` in that order, two-space indented, with a final
//! newline); flows without a key are listed as skipped. Export, apply and export again give the same bytes.

use crate::api::Api;
use crate::code::{all_flows, pretty};
use crate::error::CliError;
use clap::Args;
use hookflow_shared::api::flows::Flow;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Export every flow that has a key (the only selection there is; required so the intent is explicit).
    #[arg(long, required = true)]
    pub all: bool,
    /// The folder to write `<key>.json` files into (made when missing; files of other keys are left alone).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// A flow's file text in export's layout.
pub fn file_text(flow: &Flow, key: &str) -> String {
    let object = serde_json::json!({
        "key": key,
        "name": flow.name,
        "description": flow.description,
        "tags": flow.tags,
        "definition": flow.definition,
    });
    let mut text = pretty(&object);
    text.push('\n');
    text
}

pub async fn run(api: &Api, args: ExportArgs) -> Result<(), CliError> {
    let flows = all_flows(api).await?;
    std::fs::create_dir_all(&args.dir)
        .map_err(|e| CliError::runtime(format!("cannot make {}: {e}", args.dir.display())))?;
    let (mut written, mut skipped) = (0, 0);
    for flow in &flows {
        let Some(key) = &flow.key else {
            println!("skipped (no key): {} ({})", flow.name, flow.id);
            skipped += 1;
            continue;
        };
        let path = args.dir.join(format!("{key}.json"));
        std::fs::write(&path, file_text(flow, key))
            .map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
        println!("wrote {}", path.display());
        written += 1;
    }
    println!("Exported {written} flow(s); skipped {skipped} without a key.");
    Ok(())
}
