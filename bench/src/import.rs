//! `hookflow-bench import`: importing a large OpenAPI description (by default the Stripe API shipped with the
//! tests, hundreds of operations) through `POST /collections/import/openapi`, beside the same parse, check and
//! mapping done in process without HTTP or the database, and beside a bare YAML parse of the text.

use crate::load::BoxError;
use crate::setup::Rig;
use hookflow_control_plane::api::collections::openapi::{mapping, parse};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The description to import (JSON or YAML).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/openapi/stripe-3.0.yaml"))]
    file: PathBuf,
    /// Imports (and in-process runs) to take the median of.
    #[arg(long, default_value_t = 5)]
    runs: usize,
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    let text = std::fs::read_to_string(&args.file)?;
    let runs = args.runs.max(1);
    let mut bare = Vec::new();
    let mut in_process = Vec::new();
    let mut operations = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let value = yaml_serde::from_str::<yaml_serde::Value>(&text)?;
        bare.push(started.elapsed());
        std::hint::black_box(value);
        let started = Instant::now();
        let document = parse(&text).map_err(|e| e.message)?;
        let mapped = mapping::map(&document, None);
        in_process.push(started.elapsed());
        operations = mapped.requests.len();
    }
    let rig = Rig::start().await?;
    let mut imports = Vec::new();
    for i in 0..runs {
        let body = serde_json::json!({"name": format!("import {i}"), "source": {"document": text}});
        let started = Instant::now();
        let answer = rig.post("/collections/import/openapi", body).await?;
        imports.push(started.elapsed());
        if answer["summary"]["requests"].as_u64() != Some(u64::try_from(operations)?) {
            return Err(format!("the import answered {}", answer["summary"]).into());
        }
    }
    rig.stop().await;
    let (bare, in_process, imported) = (median(bare), median(in_process), median(imports));
    println!("import: {} ({} KiB, {operations} operations), median of {runs}", args.file.display(), text.len() / 1024);
    println!("  YAML parse only:                    {:>8.0} ms", ms(bare));
    println!(
        "  parse, check and map in process:    {:>8.0} ms  ({:.2} x the bare parse)",
        ms(in_process),
        ms(in_process) / ms(bare)
    );
    println!(
        "  POST /collections/import/openapi:   {:>8.0} ms  ({:.2} x in process; stored in one transaction)",
        ms(imported),
        ms(imported) / ms(in_process)
    );
    Ok(())
}
