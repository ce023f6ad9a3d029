//! The admission request every webhook measurement sends: the same file the criterion bench of the
//! decision reads, so the pure and the served numbers are about the same pod.

/// A pod CREATE review for a Deployment's pod in namespace [`NAMESPACE`].
pub const REVIEW: &str = include_str!("../../webhook/benches/pod-review.json");

/// The namespace the review's pod is created in; the webhook bench creates it, enabled.
pub const NAMESPACE: &str = "shop";

/// Writes `review.json` ([`REVIEW`] compact, as the apiserver sends it), `review.lua` (a `wrk` script
/// POSTing it to the webhook's path) and `path` into `dir`.
pub fn write_load_files(dir: &std::path::Path) -> anyhow::Result<()> {
    let review: serde_json::Value = serde_json::from_str(REVIEW)?;
    let body = serde_json::to_string(&review)?;
    let script = format!(
        "wrk.method = \"POST\"\nwrk.path = \"{}\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = [==[{body}]==]\n",
        vocab::WEBHOOK_PATH
    );
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("review.json"), &body)?;
    std::fs::write(dir.join("review.lua"), script)?;
    std::fs::write(dir.join("path"), vocab::WEBHOOK_PATH)?;
    Ok(())
}
