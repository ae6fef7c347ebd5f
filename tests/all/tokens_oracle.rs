//! The token counter's engine (bpe-openai) against the oracle (tiktoken-rs `encode_ordinary`) on
//! every string of every file of ../shared/corpus, in both vocabularies: each JSON, JSONL line
//! or YAML document as it is, and every string in it (keys and values, nested to any depth);
//! another file (MANIFEST.md) as its whole text. The generated half is
//! src/tokens/oracle_tests.rs.

use compactor::tokens::{TiktokenCounter, TokenCounter, Tokenizer};
use serde_json::Value;
use std::path::Path;

/// Every string of a JSON value, keys included.
fn json_strings<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|i| json_strings(i, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k);
                json_strings(v, out);
            }
        }
        _ => {}
    }
}

/// Every string of a YAML document, keys included.
fn yaml_strings(y: &yaml_rust2::Yaml, out: &mut Vec<String>) {
    use yaml_rust2::Yaml;
    match y {
        Yaml::String(s) => out.push(s.clone()),
        Yaml::Array(items) => items.iter().for_each(|i| yaml_strings(i, out)),
        Yaml::Hash(map) => {
            for (k, v) in map {
                yaml_strings(k, out);
                yaml_strings(v, out);
            }
        }
        _ => {}
    }
}

/// The texts of one corpus file (see the module docs); panics naming the file when it does not
/// parse as its extension says.
fn texts(path: &Path) -> Vec<String> {
    let name = path.display();
    let raw = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {name}: {e}"));
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let mut out = Vec::new();
    match ext {
        "json" | "jsonl" => {
            let docs: Vec<&str> = if ext == "json" {
                vec![&raw]
            } else {
                raw.lines().filter(|l| !l.trim().is_empty()).collect()
            };
            for doc in docs {
                let v: Value = serde_json::from_str(doc).unwrap_or_else(|e| panic!("{name}: {e}"));
                out.push(doc.to_string());
                let mut strings = Vec::new();
                json_strings(&v, &mut strings);
                out.extend(strings.into_iter().map(str::to_string));
            }
        }
        "yaml" | "yml" => {
            let docs = yaml_rust2::YamlLoader::load_from_str(&raw)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            for doc in &docs {
                yaml_strings(doc, &mut out);
            }
            out.push(raw);
        }
        _ => out.push(raw),
    }
    out
}

/// The strings of `texts` whose count in `vocabulary` differs from the oracle's, described.
fn mismatches(vocabulary: Tokenizer, texts: &[(String, String)]) -> Vec<String> {
    let oracle = match vocabulary {
        Tokenizer::O200kBase => tiktoken_rs::o200k_base_singleton(),
        _ => tiktoken_rs::cl100k_base_singleton(),
    };
    let counter = TiktokenCounter::new(vocabulary);
    let mut out = Vec::new();
    for (file, text) in texts {
        let expected = oracle.encode_ordinary(text).len();
        let got = counter.count_text(text);
        if got != expected {
            let excerpt: String = text.chars().take(120).collect();
            out.push(format!(
                "{file} ({vocabulary}): {got} != {expected} in {excerpt:?}"
            ));
        }
    }
    out
}

#[test]
fn every_corpus_string_counts_as_tiktoken_counts_it() {
    let files = super::support::shared_dir("corpus");
    assert!(!files.is_empty(), "../shared/corpus holds no file");
    let texts: Vec<(String, String)> = files
        .iter()
        .flat_map(|path| {
            texts(path)
                .into_iter()
                .map(|t| (path.display().to_string(), t))
        })
        .collect();
    assert!(
        texts.len() > 10_000,
        "only {} strings read from the corpus",
        texts.len()
    );
    // One thread per vocabulary (the oracle is slow on the long JSON lines).
    let found: Vec<String> = std::thread::scope(|s| {
        let cl100k = s.spawn(|| mismatches(Tokenizer::Cl100kBase, &texts));
        let mut found = mismatches(Tokenizer::O200kBase, &texts);
        found.extend(cl100k.join().unwrap());
        found
    });
    assert!(
        found.is_empty(),
        "{} counts of {} strings differ:\n{}",
        found.len(),
        texts.len(),
        found[..found.len().min(20)].join("\n")
    );
}
