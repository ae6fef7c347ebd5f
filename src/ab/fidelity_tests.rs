//! Fidelity on the real corpus: the probes cannot be gamed by a dump of their own strings or a
//! list of ids, they agree with an independent reading of the raw logs, and the session-state
//! digest at the size of Claude Code's own summary keeps at least what that summary keeps.
//!
//! The independent reading ([`Raw`]) walks the Claude Code JSONL lines with serde_json alone:
//! it shares no code with `crate::facts` or the probes.

// Byte offsets into the tests' own texts come from find(): slicing by them is the idiom here.
#![allow(clippy::string_slice)]

use crate::ab::probes::{How, Probes, Survival, fidelity};
use crate::ab::reference;
use crate::conversation::{Conversation, Message, Role};
use crate::facts::{Facts, SessionState};
use crate::format::{self, detect::ImportOptions};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};

/// The two sessions that come with Claude Code's own summary, and that summary's sub-agent log.
const REFERENCE_SESSIONS: &[(&str, &str)] = &[
    (
        "cc_spotter_fa812bfe.jsonl",
        "cc_spotter_fa812bfe_acompact_70d8e7.jsonl",
    ),
    (
        "cc_spotter_4d5611e5.jsonl",
        "cc_spotter_4d5611e5_acompact_e1f845.jsonl",
    ),
];

/// `../shared/corpus`, next to the repository, or `$COMPACTOR_SHARED/corpus` (as the
/// integration tests read it).
fn shared_corpus() -> std::path::PathBuf {
    std::env::var_os("COMPACTOR_SHARED")
        .map_or_else(
            || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"),
            std::path::PathBuf::from,
        )
        .join("corpus")
}

/// The corpus files, sorted.
fn corpus_files() -> Vec<std::path::PathBuf> {
    let dir = shared_corpus();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    paths
}

fn corpus(name: &str) -> std::path::PathBuf {
    let p = shared_corpus().join(name);
    assert!(p.exists(), "missing corpus file {}", p.display());
    p
}

fn one(text: &str) -> Conversation {
    Conversation {
        messages: vec![Message::text(Role::User, text)],
        ..Default::default()
    }
}

/// Every corpus session the library reads, whole.
fn sessions() -> Vec<(String, Conversation)> {
    let mut out = Vec::new();
    for p in corpus_files() {
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let Ok(l) = format::load(&bytes, None, ImportOptions { whole_log: true }) else {
            continue;
        };
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        out.push((name, l.conversation));
    }
    assert!(out.len() >= 8, "corpus sessions read: {}", out.len());
    out
}

#[test]
fn a_context_free_dump_of_every_probe_string_scores_below_30_percent() {
    for (name, c) in sessions() {
        let p = Probes::of(&c);
        let mut dump: Vec<String> = Vec::new();
        dump.extend(p.paths.iter().cloned());
        dump.extend(p.edited.iter().cloned());
        dump.extend(p.commands.iter().map(|c| c.command.clone()));
        dump.extend(p.failed_calls.iter().cloned());
        dump.extend(p.failure_lines.iter().cloned());
        dump.extend(p.fixes.iter().map(|f| f.fixed_by.clone()));
        dump.extend(p.user_messages.iter().cloned());
        dump.extend(p.instructions.iter().cloned());
        dump.extend(p.identifiers.iter().cloned());
        dump.extend(p.last_request.iter().cloned());
        let s = p.survival(&one(&dump.join("\n")));
        let Some(f) = fidelity(&s) else { continue };
        eprintln!(
            "{name}: a dump of its probe strings scores {:.1}%",
            100.0 * f
        );
        assert!(f < 0.3, "{name}: a dump scores {:.1}%: {s:?}", 100.0 * f);
        // Outcomes, causes, fixes and the user's messages need their context; paths, edited
        // files and instructions may survive where a dumped command or message gives them
        // one (`git commit -m "…: new file a.ex"`), identifiers are their own meaning.
        let needs_context = ["failed_calls", "fixes", "user_messages", "last_request"];
        // A dumped error line may quote its command with the error (`syntax error near `ls
        // …``): a few commands at most.
        let commands = s.iter().find(|x| x.probe == "commands").unwrap();
        assert!(commands.kept * 20 <= commands.total, "{name}: {commands:?}");
        for x in s.iter().filter(|x| needs_context.contains(&x.probe)) {
            assert_eq!(x.kept, 0, "{name}: {x:?}");
        }
    }
}

#[test]
fn bare_ids_and_passed_lines_score_below_30_percent() {
    for (name, c) in sessions() {
        let p = Probes::of(&c);
        let mut ids: Vec<String> = p.failed_calls.clone();
        ids.extend(p.commands.iter().map(|c| c.id.clone()));
        let list = ids.join("\n");
        let passed: String = ids
            .iter()
            .take(8)
            .map(|id| format!("[result {id}: passed, no errors]\n"))
            .collect();
        for text in [list, passed] {
            let s = p.survival(&one(&text));
            let Some(f) = fidelity(&s) else { continue };
            assert!(f < 0.3, "{name}: {:.1}%: {s:?}", 100.0 * f);
            let failures = s.iter().find(|x| x.probe == "failed_calls").unwrap();
            assert_eq!(failures.kept, 0, "{name}: {failures:?}");
        }
    }
}

/// A Claude Code log read with serde_json alone, up to the first `compact_boundary`.
#[derive(Debug, Default)]
struct Raw {
    /// Ids of tool_result blocks with `is_error: true`.
    failed: BTreeSet<String>,
    /// The first line of each failed result that has a letter and is not a bare exit code,
    /// without `<tool_use_error>` tags.
    first_error_line: HashMap<String, String>,
    /// For a failed call, the later call with the same name and input whose result did not fail.
    fixed_by: HashMap<String, String>,
    /// `file_path` / `path` of every tool_use.
    touched: BTreeSet<String>,
    /// `file_path` of Edit / MultiEdit / Write / NotebookEdit calls whose result did not fail.
    edited: BTreeSet<String>,
    /// What the person typed: string contents (and text blocks) of user lines that are not
    /// meta, not tool results and not harness elements (a line starting with `<`).
    typed: Vec<String>,
}

impl Raw {
    fn read(name: &str) -> Raw {
        let text = std::fs::read_to_string(corpus(name)).unwrap();
        let mut raw = Raw::default();
        // (id, name, input) of each call, in order; outcome of each result.
        let mut calls: Vec<(String, String, String)> = Vec::new();
        let mut error_of: HashMap<String, bool> = HashMap::new();
        for line in text.lines() {
            let e: Value = serde_json::from_str(line).unwrap();
            if e["type"] == "system" && e["subtype"] == "compact_boundary" {
                break;
            }
            if e["isSidechain"] == true || e["isMeta"] == true {
                continue;
            }
            let content = &e["message"]["content"];
            if e["type"] == "user" {
                if let Some(s) = content.as_str()
                    && !s.trim_start().starts_with('<')
                {
                    raw.typed.push(s.trim().to_string());
                }
                for b in content.as_array().into_iter().flatten() {
                    if b["type"] == "tool_result" {
                        let id = b["tool_use_id"].as_str().unwrap().to_string();
                        let failed = b["is_error"] == true;
                        if failed {
                            let body = match &b["content"] {
                                Value::String(s) => s.clone(),
                                Value::Array(items) => items
                                    .iter()
                                    .filter_map(|i| i["text"].as_str())
                                    .collect::<Vec<_>>()
                                    .join("\n"),
                                _ => String::new(),
                            };
                            let first = body
                                .lines()
                                .map(|l| {
                                    l.replace("<tool_use_error>", "")
                                        .replace("</tool_use_error>", "")
                                })
                                .map(|l| l.trim().to_string())
                                .find(|l| {
                                    l.chars().any(char::is_alphabetic)
                                        && !l.to_lowercase().starts_with("exit code")
                                })
                                .unwrap_or_default();
                            raw.first_error_line.insert(id.clone(), first);
                            raw.failed.insert(id.clone());
                        }
                        error_of.insert(id, failed);
                    } else if b["type"] == "text"
                        && let Some(s) = b["text"].as_str()
                        && !s.trim_start().starts_with('<')
                        && !s.starts_with("[Request interrupted")
                    {
                        raw.typed.push(s.trim().to_string());
                    }
                }
            }
            if e["type"] == "assistant" {
                for b in content.as_array().into_iter().flatten() {
                    if b["type"] != "tool_use" {
                        continue;
                    }
                    let id = b["id"].as_str().unwrap().to_string();
                    let tool = b["name"].as_str().unwrap().to_string();
                    let input = &b["input"];
                    for k in ["file_path", "path"] {
                        if let Some(p) = input[k].as_str() {
                            raw.touched.insert(p.to_string());
                        }
                    }
                    calls.push((id, tool, input.to_string()));
                }
            }
        }
        for (id, tool, input) in &calls {
            let failed = error_of.get(id) == Some(&true);
            if ["Edit", "MultiEdit", "Write", "NotebookEdit"].contains(&tool.as_str())
                && !failed
                && let Ok(v) = serde_json::from_str::<Value>(input)
                && let Some(p) = v["file_path"].as_str()
            {
                raw.edited.insert(p.to_string());
            }
        }
        for (i, (id, tool, input)) in calls.iter().enumerate() {
            if !raw.failed.contains(id) {
                continue;
            }
            let fix = calls[i + 1..].iter().find(|(fid, ftool, finput)| {
                ftool == tool && finput == input && error_of.get(fid) == Some(&false)
            });
            if let Some((fid, _, _)) = fix {
                raw.fixed_by.insert(id.clone(), fid.clone());
            }
        }
        raw
    }
}

/// The history before Claude Code's summary, the summary's text, and the format it was read as.
fn reference_pair(session: &str, sub_agent: &str) -> (Conversation, String, format::Format) {
    let load = |name: &str| {
        let bytes = std::fs::read(corpus(name)).unwrap();
        format::load(&bytes, None, ImportOptions { whole_log: true }).unwrap()
    };
    let full = load(session);
    let summary = reference::reference_summary(&load(sub_agent).conversation).unwrap();
    (
        reference::before_summary(&full.conversation),
        summary,
        full.format,
    )
}

#[test]
fn the_probes_agree_with_an_independent_reading_of_the_raw_logs() {
    for (session, sub_agent) in REFERENCE_SESSIONS {
        let raw = Raw::read(session);
        let (history, _, _) = reference_pair(session, sub_agent);
        let p = Probes::of(&history);
        let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<_>>();
        assert_eq!(set(&p.failed_calls), raw.failed, "{session}");
        assert_eq!(set(&p.edited), raw.edited, "{session}");
        assert!(raw.touched.is_subset(&set(&p.paths)), "{session}");
        assert_eq!(p.user_messages, raw.typed, "{session}");
        let fixes: HashMap<String, String> = p
            .fixes
            .iter()
            .map(|f| (f.failed.clone(), f.fixed_by.clone()))
            .collect();
        assert_eq!(fixes, raw.fixed_by, "{session}");
    }
}

/// `name` (a file name) written in `text` as a whole word.
fn names(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || "_-.".contains(c);
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(|c| word(c) && c != '.')
            || (after == Some('.')
                && !text[i + name.len() + 1..].starts_with(char::is_alphanumeric))
    })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap()
}

/// Words that say a file was changed, for the independent check.
const CHANGED: &[&str] = &[
    "edit", "created", "new", "modif", "updat", "added", "changed", "wrote", "rewr",
];

/// Files of `paths` named in `text` (by file name) on a line, or the line after it, that says
/// they were changed.
fn edited_in(text: &str, paths: &BTreeSet<String>) -> usize {
    let lines: Vec<String> = text.lines().map(str::to_lowercase).collect();
    paths
        .iter()
        .filter(|p| {
            let name = file_name(p).to_lowercase();
            lines.iter().enumerate().any(|(i, l)| {
                let around = format!("{l} {}", lines.get(i + 1).map_or("", String::as_str));
                names(l, &name) && CHANGED.iter().any(|w| around.contains(w))
            })
        })
        .count()
}

fn touched_in(text: &str, paths: &BTreeSet<String>) -> usize {
    paths.iter().filter(|p| names(text, file_name(p))).count()
}

/// Asserts that `text` tells failure `id` of `raw` on one line: with its id, the start of its
/// first error line, and `fixed by FIX` when a later call fixed it.
fn assert_failure_told(session: &str, text: &str, raw: &Raw, id: &str) {
    let first: String = raw.first_error_line[id].chars().take(30).collect();
    let line = text
        .lines()
        .find(|l| l.contains(id) && l.contains("error"))
        .unwrap_or_else(|| panic!("{session}: failure {id} not told"));
    assert!(
        line.contains(&first),
        "{session}: {id}: {line} lacks {first}"
    );
    if let Some(fix) = raw.fixed_by.get(id) {
        assert!(
            line.contains(&format!("fixed by {fix}")),
            "{session}: {id} hides its fix {fix}: {line}"
        );
    }
}

#[test]
fn the_digest_at_claude_codes_size_keeps_at_least_what_its_summary_keeps() {
    let counter = crate::tokens::counter_for(Default::default());
    for (session, sub_agent) in REFERENCE_SESSIONS {
        let raw = Raw::read(session);
        let (history, summary, _) = reference_pair(session, sub_agent);
        let size = counter.count_text(&summary);
        let facts = Facts::of(&history.messages);
        let digest = SessionState::of(&facts, 0..history.messages.len()).marker_text(
            history.messages.len(),
            counter.count_conversation(&history),
            size,
            counter.as_ref(),
        );
        let digest_tokens = counter.count_text(&digest);
        assert!(digest_tokens <= size, "{session}: {digest_tokens} > {size}");
        let (touched, edited) = (
            (
                touched_in(&digest, &raw.touched),
                touched_in(&summary, &raw.touched),
            ),
            (
                edited_in(&digest, &raw.edited),
                edited_in(&summary, &raw.edited),
            ),
        );
        eprintln!(
            "{session}: {size} tokens (digest {digest_tokens}); touched paths digest {}/{n} vs \
             Claude Code {}/{n}; edited as edited digest {}/{e} vs Claude Code {}/{e}",
            touched.0,
            touched.1,
            edited.0,
            edited.1,
            n = raw.touched.len(),
            e = raw.edited.len(),
        );
        assert!(touched.0 >= touched.1, "{session}: touched {touched:?}");
        assert!(edited.0 >= edited.1, "{session}: edited {edited:?}");
        // Every user message, whole or around its constraints (its first sentence at least).
        for u in &raw.typed {
            let first = u.split(". ").next().unwrap();
            assert!(digest.contains(first), "{session}: user message lost: {u}");
        }
        // Every failure with its id and first error line (its start), and its fix when one
        // followed.
        for id in &raw.failed {
            assert_failure_told(session, &digest, &raw, id);
        }
    }
}

#[test]
fn ab_reference_scores_claude_codes_summary_and_each_strategy_at_equal_tokens() {
    let base = crate::config::Loader {
        file: None,
        text: None,
        preset: None,
        env: false,
        preset_dirs: vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("strategies")],
        strategies: Vec::new(),
    };
    let arms = vec![crate::ab::Arm::load("truncate", &base)];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (session, sub_agent) = REFERENCE_SESSIONS[0];
    let raw = Raw::read(session);
    let (history, summary, read_as) = reference_pair(session, sub_agent);
    let format = crate::format::Format::Anthropic;
    assert_eq!(read_as, format);
    let r = rt.block_on(reference::compare(&history, format, &summary, &arms));
    let names: Vec<&str> = r.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["reference", "truncate", "digest"]);
    let by = |col: &str, probe: &str| -> Survival {
        let c = r.columns.iter().find(|c| c.name == col).unwrap();
        c.survival
            .iter()
            .find(|s| s.probe == probe)
            .unwrap()
            .clone()
    };
    // Every column is held to the summary's size.
    for c in &r.columns {
        assert!(c.tokens <= r.budget, "{c:?} over {}", r.budget);
    }
    // Claude Code's summary names no call ids: no failure is told by id.
    assert_eq!(by("reference", "failed_calls").kept, 0);
    assert_eq!(by("digest", "failed_calls").kept, raw.failed.len());
    assert_eq!(by("digest", "edited").kept, raw.edited.len());
    assert_eq!(by("digest", "fixes").how.get(&How::Stale), None);
    let md = reference::markdown(&r);
    assert!(
        md.contains("| probe | reference | truncate | digest |"),
        "{md}"
    );
    eprintln!("{md}");
}

/// An Anthropic request body read back with serde_json alone: one text line per content
/// block (a tool_use as `NAME INPUT-JSON`, a tool_result as its text), and the ids of the
/// kept tool_use blocks and of the kept tool_result blocks flagged `is_error`.
fn output_text(body: &Value) -> (String, BTreeSet<String>, BTreeSet<String>) {
    let (mut text, mut calls, mut failed) = (String::new(), BTreeSet::new(), BTreeSet::new());
    for m in body["messages"].as_array().unwrap() {
        let blocks = match &m["content"] {
            Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => Vec::new(),
        };
        for b in &blocks {
            match b["type"].as_str() {
                Some("text") => text.push_str(b["text"].as_str().unwrap()),
                Some("tool_use") => {
                    calls.insert(b["id"].as_str().unwrap().to_string());
                    text.push_str(&format!("{} {}", b["name"].as_str().unwrap(), b["input"]));
                }
                Some("tool_result") => {
                    if b["is_error"] == true {
                        failed.insert(b["tool_use_id"].as_str().unwrap().to_string());
                    }
                    match &b["content"] {
                        Value::String(s) => text.push_str(s),
                        Value::Array(a) => {
                            for i in a {
                                text.push_str(i["text"].as_str().unwrap_or(""));
                                text.push('\n');
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
            text.push('\n');
        }
    }
    (text, calls, failed)
}

#[test]
fn truncate_at_claude_codes_size_keeps_at_least_what_its_summary_keeps() {
    let loader = crate::config::Loader {
        file: None,
        text: None,
        preset: Some("truncate".into()),
        env: false,
        preset_dirs: vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("strategies")],
        strategies: Vec::new(),
    };
    let mut settings = loader.load().unwrap();
    // As `compactor ab --reference` runs it: compacted *to* the summary's size.
    settings.budget.trigger = 1.0;
    settings.budget.target = 1.0;
    let compactor = crate::Compactor::from_config(settings).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for (session, sub_agent) in REFERENCE_SESSIONS {
        let raw = Raw::read(session);
        let (history, summary, read_as) = reference_pair(session, sub_agent);
        assert_eq!(read_as, format::Format::Anthropic);
        let size = compactor
            .counter()
            .count_message(&Message::text(Role::User, summary.clone()));
        let out = rt
            .block_on(compactor.compact(&history, crate::Format::Anthropic, Some(size)))
            .unwrap();
        assert!(
            out.report.tokens_after <= size,
            "{session}: {} > {size}",
            out.report.tokens_after
        );
        let body = crate::Format::Anthropic.write(out.conversation.as_ref());
        let (text, calls, failed_kept) = output_text(&body);
        let touched = (
            touched_in(&text, &raw.touched),
            touched_in(&summary, &raw.touched),
        );
        let edited = (
            edited_in(&text, &raw.edited),
            edited_in(&summary, &raw.edited),
        );
        eprintln!(
            "{session}: {size} tokens (truncate {}); touched paths truncate {}/{n} vs Claude Code \
             {}/{n}; edited as edited truncate {}/{e} vs Claude Code {}/{e}",
            out.report.tokens_after,
            touched.0,
            touched.1,
            edited.0,
            edited.1,
            n = raw.touched.len(),
            e = raw.edited.len(),
        );
        assert!(touched.0 >= touched.1, "{session}: touched {touched:?}");
        assert!(edited.0 >= edited.1, "{session}: edited {edited:?}");
        for u in &raw.typed {
            let first = u.split(". ").next().unwrap();
            assert!(text.contains(first), "{session}: user message lost: {u}");
        }
        for id in &raw.failed {
            let fix = raw.fixed_by.get(id);
            if failed_kept.contains(id) {
                // Kept as it was: its fix, a later call, is kept too.
                if let Some(fix) = fix {
                    assert!(
                        calls.contains(fix),
                        "{session}: {id} kept, its fix {fix} not"
                    );
                }
                continue;
            }
            assert_failure_told(session, &text, &raw, id);
        }
    }
}

/// The paths a digest's file lines (`[edited] a, b`, `[read] c`) write, one per item.
fn file_items(digest: &str) -> Vec<String> {
    const WORDS: &[&str] = &["created", "edited", "deleted", "read", "searched"];
    digest
        .lines()
        .filter_map(|l| {
            let (word, rest) = l.strip_prefix('[')?.split_once("] ")?;
            WORDS.contains(&word).then_some(rest)
        })
        .flat_map(|rest| rest.split(", ").map(str::to_string))
        .collect()
}

#[test]
fn the_digest_names_files_with_their_folder_and_keeps_more_when_room_is_short() {
    let counter = crate::tokens::counter_for(Default::default());
    let (session, sub_agent) = REFERENCE_SESSIONS[1];
    let raw = Raw::read(session);
    let (history, summary, _) = reference_pair(session, sub_agent);
    let size = counter.count_text(&summary);
    let facts = Facts::of(&history.messages);
    let state = SessionState::of(&facts, 0..history.messages.len());
    let tokens = counter.count_conversation(&history);
    // At Claude Code's size, and at a third of it (room short for the whole paths).
    for (budget, least) in [(size, 13), (size / 3, 13)] {
        let digest = state.marker_text(history.messages.len(), tokens, budget, counter.as_ref());
        let items = file_items(&digest);
        eprintln!(
            "{session} at {budget}: {} file items, touched {}/{}, edited {}/{}: {items:?}",
            items.len(),
            touched_in(&digest, &raw.touched),
            raw.touched.len(),
            edited_in(&digest, &raw.edited),
            raw.edited.len()
        );
        // Every path of this session has a folder: none is written as a bare file name.
        for item in &items {
            assert!(
                item.contains('/'),
                "{session} at {budget}: bare name {item:?}"
            );
        }
        assert!(
            touched_in(&digest, &raw.touched) >= least,
            "{session} at {budget}"
        );
    }
}
