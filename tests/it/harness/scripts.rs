//! Client scripts nobody on the team wrote the library of (the official
//! SDKs, litellm, the AI SDK), run against a gateway: the one runner the
//! tests share, and the two ways their output is read.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use super::PROVIDER_KEY;

/// Runs `program` (`python3`, `node`) on `script` (a path under the
/// workspace root) with the environment `vars`; its standard output. A
/// failed run fails the test with both outputs; neither may hold the
/// provider's key.
pub async fn run_script(
    program: &'static str,
    script: &str,
    vars: Vec<(&'static str, String)>,
) -> String {
    let path: PathBuf = super::workspace_root().join(script);
    let shown = script.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(program)
            .arg(path)
            .envs(vars)
            .output()
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{program} runs {shown} (scripts/setup-tools.sh installs it): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    assert!(
        !stdout.contains(PROVIDER_KEY) && !stderr.contains(PROVIDER_KEY),
        "the provider's key reached a client"
    );
    stdout
}

/// The JSON objects a script printed, one per line.
pub fn reports(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
        .collect()
}

/// The checks a script printed as `ok NAME {json}`: each name and its JSON.
pub fn checks(stdout: &str) -> HashMap<String, Value> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok "))
        .filter_map(|l| l.split_once(' '))
        .map(|(name, v)| (name.to_owned(), serde_json::from_str(v).unwrap()))
        .collect()
}
