//! What the proxy says: the start-up line and one log line per compaction and per skip (the
//! real service on 127.0.0.1, configured from a file and the environment together), and
//! `compactor config`: every effective value with where it came from; a tier list set by a
//! file is named by the file.

use crate::server::{Reply, history, post_json, settings, spawn_upstream, state};
use axum::http::StatusCode;
use compactor::config::Loader;
use compactor::server::{AppState, app};
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub(crate) fn write(name: &str, text: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("proxy_surface");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The built-in defaults and `file`, no environment (the test process's own is not read).
fn with_file(file: &Path) -> Loader {
    Loader {
        file: Some(file.to_path_buf()),
        ..crate::server::loader()
    }
}

/// An Anthropic body whose first message is a tool_result with no call: a known rule broken.
pub(crate) fn orphan() -> String {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "stale"}]},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "go on"}
    ]})
    .to_string()
}

// ---------------------------------------------------------------------------------------------
// The real service: start-up line, a line per compaction and per skip, configuration from a
// file and the environment together.

/// `compactor serve` as a child process, its stderr lines sent to a channel as they come
/// (ANSI colour codes taken out).
struct Service {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Service {
    fn start(config: &Path, env: &[(&str, &str)]) -> Service {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_compactor"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(strip_ansi(&line)).is_err() {
                    break;
                }
            }
        });
        Service {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The first line (from the start) holding `needle`, waiting up to 20 s for it.
    fn line(&mut self, needle: &str) -> String {
        if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
            return l.clone();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.contains(needle) {
                        return l;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!("no line with {needle:?} in:\n{}", self.seen.join("\n"))
                }
            }
        }
    }

    /// Every line seen so far holding `needle`.
    fn all(&self, needle: &str) -> Vec<String> {
        self.seen
            .iter()
            .filter(|l| l.contains(needle))
            .cloned()
            .collect()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `body` posted to the service at `addr` as an Anthropic request; the status and the
/// `x-compactor-*` header.
async fn post_anthropic(addr: &str, body: String) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {addr}\r\nx-api-key: sk-test\r\n\
         anthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).await.unwrap();
    let status = answer[9..12].parse().unwrap();
    let header = answer
        .lines()
        .find(|l| l.starts_with("x-compactor-"))
        .unwrap_or_default()
        .to_string();
    (status, header)
}

/// A partial `[llm]` in the file (no provider) completed by `COMPACTOR__LLM__PROVIDER`, and a
/// key of it set by the environment alone: the service starts (it refused both with
/// `missing configuration field "llm.provider"`), and its first line says what it does.
#[tokio::test]
async fn the_service_starts_from_a_file_and_the_environment_and_says_what_it_does() {
    let (upstream, seen) = spawn_upstream(Reply::json(200, "{}")).await;
    let config = write(
        "serve.toml",
        &format!(
            "[budget]\ntokens = 4000\n[policy]\ntiers = [\"microcompact\", \"truncate\"]\n\
             [server]\nanthropic_upstream = \"{upstream}\"\nopenai_upstream = \"{upstream}/v1\"\n\
             [llm]\nmodel = \"summarizer\"\nbase_url = \"http://127.0.0.1:9/v1\"\n"
        ),
    );
    let mut service = Service::start(
        &config,
        &[
            ("COMPACTOR__LLM__PROVIDER", "openai"),
            ("COMPACTOR__LLM__TIMEOUT_SECS", "20"),
        ],
    );
    let start = service.line("compactor serve: listening on 127.0.0.1:");
    let addr = start
        .split("listening on ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let fields = start.split("listening on ").nth(1).unwrap();
    assert_eq!(
        fields,
        format!(
            "{addr} addr={addr} anthropic_upstream={upstream} openai_upstream={upstream}/v1 \
             gemini_upstream=https://generativelanguage.googleapis.com \
             budget=4000 trigger=3200 target=2400 tiers=microcompact+truncate [serve.toml] \
             llm=openai summarizer at http://127.0.0.1:9 store=in-process auth=none"
        )
    );
    // One compaction, then two bodies that break a rule (a WARN, then the second of the
    // minute at INFO), then one that is not JSON.
    let (status, header) = post_anthropic(&addr, history(30).to_string()).await;
    assert_eq!(status, 200);
    let tokens = header
        .trim_start_matches("x-compactor-tokens: ")
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let (before, after) = tokens.split_once("->").unwrap();
    let tier = header.split("tier=").nth(1).unwrap().to_string();
    // Sent broken on purpose: the proxy forwards them as they came.
    seen.sent_invalid(orphan());
    seen.sent_invalid("not json");
    for _ in 0..2 {
        let (status, header) = post_anthropic(&addr, orphan()).await;
        assert_eq!(
            (status, header.as_str()),
            (200, "x-compactor-skipped: invalid history")
        );
    }
    let (_, header) = post_anthropic(&addr, "not json".into()).await;
    assert_eq!(header, "x-compactor-skipped: not JSON");
    assert_eq!(seen.lock().unwrap().len(), 4);
    let compacted = service.line("proxy: compacted:");
    assert!(
        compacted.contains(&format!(
            " INFO compactor::server::proxy: proxy: compacted: {before} -> {after} tokens \
             route=/v1/messages model=claude-sonnet-4-5 tier={tier} status=compacted ms="
        )),
        "{compacted}"
    );
    service.line("proxy: forwarded as it came: not JSON");
    let skips = service.all("invalid history");
    assert_eq!(skips.len(), 2, "{skips:#?}");
    let first = "route=/v1/messages rule=orphan_result violations=1 first=messages[0].content[0]: \
                 tool_result toolu_x has no tool_use in the previous message";
    assert!(
        skips[0].contains(" WARN compactor::server::proxy: proxy: invalid history (a provider rule is broken): forwarded as it came, the provider answers ")
            && skips[0].ends_with(&format!("{first} held_back=0")),
        "{}",
        skips[0]
    );
    assert!(
        skips[1].contains(
            " INFO compactor::server::proxy: proxy: invalid history forwarded as it came "
        ) && skips[1].ends_with(first),
        "{}",
        skips[1]
    );
    assert!(
        service.all("not JSON")[0].contains(" INFO ")
            && service.all("not JSON")[0].ends_with("route=/v1/messages reason=not_json"),
        "{:?}",
        service.all("not JSON")
    );
}

// ---------------------------------------------------------------------------------------------
// `compactor config`: every key with where it came from.

fn compactor(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_compactor"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

#[test]
fn config_prints_each_effective_value_with_its_origin() {
    let file = write(
        "origins.toml",
        "[budget]\ntokens = 50000\n[llm]\nmodel = \"m\"\n",
    );
    let f = file.display();
    let out = compactor(
        &[
            "config",
            "--config",
            file.to_str().unwrap(),
            "--strategy",
            "microcompact",
            "--listen",
            "127.0.0.1:9000",
        ],
        &[
            ("COMPACTOR__LLM__PROVIDER", "openai"),
            ("COMPACTOR__BUDGET__TRIGGER", "0.7"),
        ],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "# preset: microcompact (--strategy); tier list named in reports: [microcompact]"
            .to_string(),
        "budget.context_window = 0  # default".into(),
        format!("budget.tokens = 50000  # file {f}"),
        "budget.trigger = 0.7  # environment COMPACTOR__BUDGET__TRIGGER".into(),
        "policy.tiers = [\"microcompact\"]  # preset microcompact".into(),
        "microcompact.keep_recent = 3  # preset microcompact".into(),
        "llm.provider = \"openai\"  # environment COMPACTOR__LLM__PROVIDER".into(),
        format!("llm.model = \"m\"  # file {f}"),
        "# llm.api_key_env: not set  # default".into(),
        "server.listen = \"127.0.0.1:9000\"  # flag --listen".into(),
        "tokens.models.\"claude-*\".ratio = 1.105  # default".into(),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    // The output is TOML that reads back to the same values.
    let back: Value = config::Config::builder()
        .add_source(config::File::from_str(&text, config::FileFormat::Toml))
        .build()
        .unwrap()
        .try_deserialize()
        .unwrap();
    assert_eq!(back["budget"]["trigger"], json!(0.7));
    assert_eq!(back["policy"]["tiers"], json!(["microcompact"]));
    assert_eq!(
        back["tokens"]["models"]["claude-*"]["tool_call"],
        json!(172)
    );
}

/// The loader validates the merged configuration: with `[llm]` in the file, one key of it from
/// the environment is no fault of the environment's; a field no source gives is named with
/// every source.
#[test]
fn an_llm_section_split_between_file_and_environment_loads() {
    let whole = write(
        "llm_whole.toml",
        "[llm]\nprovider = \"openai\"\nmodel = \"m\"\n",
    );
    let out = compactor(
        &["config", "--config", whole.to_str().unwrap()],
        &[("COMPACTOR__LLM__TIMEOUT_SECS", "20")],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines()
            .any(|l| l == "llm.timeout_secs = 20.0  # environment COMPACTOR__LLM__TIMEOUT_SECS"),
        "{text}"
    );
    let partial = write("llm_partial.toml", "[llm]\nmodel = \"m\"\n");
    let out = compactor(&["config", "--config", partial.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: the merged configuration (config file {}, preset default): configuration: \
             missing configuration field \"llm.provider\"\n",
            partial.display()
        )
    );
    // A wrong value in the environment is still its own fault, named.
    let out = compactor(
        &["config", "--config", whole.to_str().unwrap()],
        &[("COMPACTOR__LLM__TIMEOUT_SECS", "soon")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).starts_with(
            "error: environment (COMPACTOR__LLM__TIMEOUT_SECS): configuration: invalid type: \
             string \"soon\""
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Tiers set by a config file are named by the file in the report and its summary line, not
/// `[default]`.
#[tokio::test]
async fn a_tier_list_set_by_a_file_is_named_by_the_file() {
    let file = write("tiers.toml", "[policy]\ntiers = [\"truncate\"]\n");
    let s = with_file(&file).load().unwrap();
    assert_eq!((s.preset.as_str(), s.label()), ("default", "tiers.toml"));
    let st = AppState::from_parts(s, with_file(&file), None).unwrap();
    let (status, body) = post_json(
        app(st),
        "/v1/compact",
        &json!({"request": history(20), "budget": 4000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["report"]["strategy"], "tiers.toml");
    // Without the file's tiers: the preset's name.
    let (_, body) = post_json(
        app(state(settings(0))),
        "/v1/compact",
        &json!({"request": history(20), "budget": 4000}),
    )
    .await;
    assert_eq!(body["report"]["strategy"], "default");
    let input = write("tiers_in.json", &history(20).to_string());
    let out = compactor(
        &[
            "compact",
            input.to_str().unwrap(),
            "--budget",
            "4000",
            "--config",
            file.to_str().unwrap(),
            "-o",
            write("tiers_out.json", "").to_str().unwrap(),
        ],
        &[],
    );
    // The summary line (a note on the recall directory may follow it).
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("compacted") || l.starts_with("over_budget"))
        .unwrap_or_default();
    assert!(line.contains(" by truncate [tiers.toml]"), "{stderr}");
}
