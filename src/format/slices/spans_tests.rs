//! The byte scanner held to serde_json (`oracle.rs`, `RawValue` spans): on every body `scan`
//! gives the spans serde_json gives, and on a body serde_json refuses, `scan` gives up or gives
//! spans whose read gives up (the whole read then answers with the exact error). Bodies: every
//! corpus transcript written as a request body of each format (compact and pretty), every case
//! file and its request (../shared/cases, ../shared/cases/next, tests/cases), the nesting limit
//! level by level, unusual bodies, and random ones (`props_tests.rs`'s values: strings with
//! escapes, `\u` escapes and non-ASCII text, nested arrays and objects, whitespace between
//! tokens; here also random and escaped keys, the message key twice, a byte changed or the
//! body cut short).

use super::{Spans, oracle, read, scan};
use crate::format::Format;
use crate::format::detect::ImportOptions;
use crate::format::props_tests::{quote, text, value, ws};
use proptest::prelude::*;
use serde_json::Value;
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};

const FORMATS: [Format; 4] = [
    Format::Anthropic,
    Format::OpenAiChat,
    Format::OpenAiResponses,
    Format::Gemini,
];

/// Checks the scanner against serde_json on `body` for every format's message key; the
/// formats whose message array the scanner found.
fn agree(body: &[u8]) -> Vec<Format> {
    let valid = serde_json::from_slice::<Value>(body).is_ok();
    let text = || String::from_utf8_lossy(body);
    let mut found = Vec::new();
    for format in FORMATS {
        let old = scan(body, format);
        let new =
            oracle::spans(body, format.messages_key()).map(|(array, items)| Spans { array, items });
        if valid {
            assert_eq!(old, new, "{format:?}: {}", text());
            if let Some(spans) = &new {
                // The bench's one-pass reader finds the same items.
                let items = oracle::items(body, format.messages_key());
                assert_eq!(items.as_ref(), Some(&spans.items), "{format:?}: {}", text());
            }
        } else {
            assert_eq!(new, None, "serde_json read a body it refuses: {}", text());
            if let Some(spans) = old.clone() {
                assert!(
                    read(format, body, spans, None).is_none(),
                    "{format:?}: the span read took a body serde_json refuses: {}",
                    text()
                );
            }
        }
        if old.is_some() {
            found.push(format);
        }
    }
    found
}

/// `<shared>/<sub>`: `$COMPACTOR_SHARED` when set, else `../shared` next to the repository; a
/// panic naming the path when it is not there.
fn shared(sub: &str) -> PathBuf {
    let root = std::env::var_os("COMPACTOR_SHARED").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
        PathBuf::from,
    );
    let path = root.join(sub);
    assert!(
        path.is_dir(),
        "{} does not exist: these tests read the shared corpus and cases (the folder `shared` \
         next to the repository; set COMPACTOR_SHARED to use another place)",
        path.display()
    );
    path
}

/// The files of `dir` whose names end with one of `ends`, sorted.
fn files(dir: &Path, ends: &[&str]) -> Vec<PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| ends.iter().any(|end| p.to_string_lossy().ends_with(end)))
        .collect();
    paths.sort();
    paths
}

fn read_file(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_corpus_session_as_a_body_of_each_format_scans_as_serde_json_reads_it() {
    let dir = shared("corpus");
    let paths = files(&dir, &[".json", ".jsonl"]);
    assert!(!paths.is_empty(), "no transcript in {}", dir.display());
    for path in paths {
        let bytes = read_file(&path);
        // The transcript file itself: a JSON document or JSONL, which no scan may take.
        agree(&bytes);
        let loaded = crate::format::load(&bytes, None, ImportOptions { whole_log: true })
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for to in FORMATS {
            let conversation = crate::format::convert(&loaded.conversation, loaded.format, to);
            let compact = to.write_bytes(&conversation);
            let pretty = serde_json::to_vec_pretty(&to.write(&conversation)).unwrap();
            for body in [compact, pretty] {
                assert!(
                    agree(&body).contains(&to),
                    "{} as {to:?}: not scanned",
                    path.display()
                );
            }
        }
    }
}

/// A case file's request body, as its bytes in the file.
#[derive(serde::Deserialize)]
struct Case<'a> {
    #[serde(borrow)]
    request: Option<&'a RawValue>,
    format: Option<Format>,
}

#[test]
fn every_case_and_its_request_scan_as_serde_json_reads_them() {
    let repo_cases = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let shared_cases = shared("cases");
    let mut dirs = vec![shared_cases.clone(), repo_cases];
    dirs.extend(
        std::fs::read_dir(&shared_cases)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir()),
    );
    let mut requests = 0;
    for dir in dirs {
        for path in files(&dir, &[".json"]) {
            let bytes = read_file(&path);
            agree(&bytes);
            let case: Case = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let (Some(request), Some(format)) = (case.request, case.format) else {
                continue;
            };
            let found = agree(request.get().as_bytes());
            assert!(found.contains(&format), "{}: not scanned", path.display());
            requests += 1;
        }
    }
    assert!(requests > 0, "no case with a request");
}

#[test]
fn both_refuse_the_same_bodies_at_the_nesting_limit() {
    let mut flips = 0;
    for n in 110..=135 {
        let deep = format!("{}{}", "[".repeat(n), "]".repeat(n));
        for body in [
            format!(r#"{{"messages": [{{"role": "user", "content": {deep}}}]}}"#),
            format!(r#"{{"tools": {deep}, "messages": []}}"#),
            format!(r#"[{{"role": "user", "content": {deep}}}]"#),
            format!("[{deep}]"),
        ] {
            let found = agree(body.as_bytes());
            flips += usize::from(found.is_empty());
        }
    }
    assert!(flips > 0, "no body was deep enough to be refused");
}

#[test]
fn unusual_bodies_scan_as_serde_json_reads_them() {
    for body in [
        &br#"{"messag\u0065s": [1, "two", {"3": [4]}]}"#[..],
        br#"{"\u0069nput": [], "contents": [ ]}"#,
        br#"{"messages": [], "messages": []}"#,
        br#"{"messages": {}, "input": [true]}"#,
        br#"{}"#,
        br#"[]"#,
        b" \r\n\t[ 1 , 2 ]\n",
        br#"{"messages": [{"a": "\ud800"}]}"#,
        br#"{"messages": [{"a": "\ud83d\ude42 \" \\ \/ \b\f\n\r\t"}]}"#,
        b"{\"messages\": [\"\x01\"]}",
        b"{\"messages\": [\"\xff\"]}",
        b"\xef\xbb\xbf{\"messages\": []}",
        br#"{"messages": [1,]}"#,
        br#"{"messages": [1] "x": 2}"#,
        br#"{"messages": [01, -, 1.e5, tru]}"#,
        br#"{"messages": [[}}]}"#,
        br#"{"model": "m\"]}", "messages": [{"c": "a ] } \\\" ["}]}"#,
        br#""messages""#,
        b"",
    ] {
        agree(body);
    }
}

/// A message key as written: plain, or with its first letter as a `\u` escape.
fn key_text(key: &str, escaped: bool) -> String {
    match key.char_indices().nth(1) {
        Some((i, _)) if escaped => {
            let (first, rest) = key.split_at(i);
            format!(
                "\"\\u{:04x}{rest}\"",
                u32::from(first.chars().next().unwrap())
            )
        }
        _ => format!("\"{key}\""),
    }
}

/// A request body: an object of `fields` with the message array of `items` under `key` at
/// `at` (a second time at the end when `twice`), or the bare array; whitespace `w` around
/// every token.
#[allow(clippy::too_many_arguments)]
fn body(
    items: &[String],
    fields: &[(String, String)],
    key: &str,
    escaped: bool,
    at: usize,
    twice: bool,
    bare: bool,
    w: &str,
) -> String {
    let array = format!("[{w}{}{w}]", items.join(&format!("{w},{w}")));
    if bare {
        return format!("{w}{array}{w}");
    }
    let mut members: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{k}{w}:{w}{v}"))
        .collect();
    let message = format!("{}{w}:{w}{array}", key_text(key, escaped));
    members.insert(at.min(members.len()), message.clone());
    if twice {
        members.push(message);
    }
    format!("{w}{{{w}{}{w}}}{w}", members.join(&format!("{w},{w}")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random bodies, and the same bodies with a byte changed or cut short.
    #[test]
    fn random_bodies_scan_as_serde_json_reads_them(
        items in prop::collection::vec(value(), 0..5),
        fields in prop::collection::vec((text().prop_map(|t| quote(&t)), value()), 0..4),
        key in prop::sample::select(vec!["messages", "input", "contents", "system"]),
        (escaped, twice, bare) in (any::<bool>(), prop::bool::weighted(0.1), prop::bool::weighted(0.15)),
        at in 0usize..5,
        w in ws(),
        broken in prop::option::of((any::<prop::sample::Index>(), prop::sample::select(b"\"\\]}[{,: x\x01\xff".to_vec()), any::<bool>())),
    ) {
        let text = body(&items, &fields, key, escaped, at, twice, bare, w);
        let mut bytes = text.into_bytes();
        agree(&bytes);
        if let Some((i, byte, cut)) = broken {
            let i = i.index(bytes.len().max(1));
            if cut {
                bytes.truncate(i);
            } else if let Some(b) = bytes.get_mut(i) {
                *b = byte;
            }
            agree(&bytes);
        }
    }
}
