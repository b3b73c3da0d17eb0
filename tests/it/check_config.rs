//! `gateway check-config` (#46): everything `serve` reads, checked without
//! starting: every problem at once, each with its file and line, a
//! non-zero exit; `--connect` asks every dependency and names the one that
//! does not answer.

use crate::harness::*;

/// The test providers file with three mistakes, and the line of each.
fn three_mistakes() -> (String, [usize; 3]) {
    let text = r#"[[provider]]
id = "sim"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "GW_IT_CHECK_KEY"

[[provider.model]]
id = "good"
type = "chat"
input_per_mtok = "1.00"

[[provider.model]]
id = "bad-price"
type = "chat"
input_per_mtok = "one dollar"

[[provider.model]]
id = "bad-type"
type = "chatbot"

[[provider.model]]
id = "bad-cap"
type = "chat"
max_output_tokens = 0
"#;
    let line = |id: &str| {
        text.lines()
            .position(|l| l == format!("id = \"{id}\""))
            .unwrap()
            + 1
    };
    let lines = [line("bad-price"), line("bad-type"), line("bad-cap")];
    (text.to_owned(), lines)
}

/// `gateway check-config ARGS` on a fresh data directory with `vars`.
fn check(dir: &TempDir, vars: &[(&str, String)], args: &[&str]) -> (bool, String) {
    let mut c = dir.cli(true);
    c.envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .arg("check-config")
        .args(args);
    let out = c.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn three_mistakes_of_a_providers_file_are_listed_with_their_lines_and_exit_non_zero() {
    let dir = TempDir::new("check-config");
    let (text, lines) = three_mistakes();
    let path = dir.0.join("providers.toml");
    std::fs::write(&path, text).unwrap();
    let vars = [("GATEWAY_PROVIDERS", path.display().to_string())];
    let (ok, out) = check(&dir, &vars, &[]);
    assert!(!ok, "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 3, "{out}");
    for (e, (line, key)) in
        errors.iter().zip(
            lines
                .iter()
                .zip(["input_per_mtok", "type", "max_output_tokens"]),
        )
    {
        assert!(e.contains(&format!("providers.toml: line {line}:")), "{e}");
        assert!(e.contains(key), "{e}");
    }
    // A bad variable beside them: listed too.
    let mut more = vars.to_vec();
    more.push(("GATEWAY_DB_SYNC", "sometimes".into()));
    let (_, out) = check(&dir, &more, &[]);
    assert!(out.contains("GATEWAY_DB_SYNC"), "{out}");

    // The mistakes fixed: sound, exit 0; nothing written in the data directory.
    let fixed = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"one dollar\"", "\"1.00\"")
        .replace("\"chatbot\"", "\"chat\"")
        .replace("max_output_tokens = 0", "max_output_tokens = 10");
    std::fs::write(&path, fixed).unwrap();
    let (ok, out) = check(&dir, &vars, &[]);
    assert!(ok, "{out}");
    let files: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files, vec![std::ffi::OsString::from("providers.toml")]);
}

#[test]
fn connect_names_an_unreachable_redis() {
    let dir = TempDir::new("check-connect");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let vars = [("GATEWAY_REDIS_URL", format!("redis://127.0.0.1:{port}"))];
    let (ok, out) = check(&dir, &vars, &["--connect"]);
    assert!(!ok, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("error: redis: ")),
        "{out}"
    );
    assert!(
        out.lines().any(|l| l.starts_with("ok: database: ")),
        "{out}"
    );
}
