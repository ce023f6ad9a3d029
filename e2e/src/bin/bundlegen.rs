//! Writes the OLM bundle (`bundle/`) from the chart and the CRDs: see `linkerd_multus_e2e::bundle`.
//! `--check`: write nothing, exit 1 when `bundle/` differs from what it would write.

use std::process::ExitCode;

use linkerd_multus_e2e::bundle;

fn main() -> ExitCode {
    let files = match bundle::inputs().and_then(|inputs| bundle::build(&inputs)) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("bundlegen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = bundle::bundle_dir();
    let result = if std::env::args().any(|a| a == "--check") {
        bundle::differences(&dir, &files).map(|diffs| {
            for d in &diffs {
                eprintln!("{d}");
            }
            diffs.is_empty()
        })
    } else {
        bundle::write(&dir, &files).map(|()| {
            println!("wrote {} files under {}", files.len(), dir.display());
            true
        })
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bundlegen: {e}");
            ExitCode::FAILURE
        }
    }
}
