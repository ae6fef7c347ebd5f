//! File paths as a reader needs them: relative to the session's working folder, or clipped from
//! the left so the file name and its nearest folders stay; and matched back by file name plus
//! as many parent folders as it takes to tell the session's files apart.

/// Characters longer paths are clipped to (from the left, on a `/`).
pub const PATH_CHARS: usize = 72;

/// How paths are shown: under `root` (the folder most touched paths share) they are written
/// relative to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathStyle {
    /// The working folder, without a trailing `/`.
    pub root: Option<String>,
}

impl PathStyle {
    /// The deepest folder (at least two levels deep) that more than half of the absolute
    /// `paths` lie under; `None` when there is no such folder.
    ///
    /// Found without counting every folder of every path: the paths under a folder are one run
    /// of the sorted paths, so a folder holding more than half of them holds the middle one;
    /// the folders of the middle path are tried deepest first, each counted by binary search.
    pub fn of<'a>(paths: impl Iterator<Item = &'a str>) -> PathStyle {
        let mut sorted: Vec<&str> = paths.filter(|p| p.starts_with('/')).collect();
        sorted.sort_unstable();
        let absolute = sorted.len();
        let Some(middle) = sorted.get(absolute / 2) else {
            return PathStyle::default();
        };
        // Folders at least two levels deep: the middle path up to its third `/` or a later one.
        let root = middle
            .match_indices('/')
            .skip(2)
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .filter_map(|i| Some((middle.get(..i)?, middle.get(..=i)?)))
            .find(|(_, under)| {
                // Paths starting with `folder/`: one run of the sorted paths.
                let from = sorted.partition_point(|p| p < under);
                let to = from + sorted[from..].partition_point(|p| p.starts_with(under));
                2 * (to - from) > absolute
            })
            .map(|(folder, _)| folder.to_string());
        PathStyle { root }
    }

    /// `path` relative to the root when under it, else as written; clipped from the left to
    /// [`PATH_CHARS`] on a folder boundary (`…/live/session_live.ex`).
    pub fn show(&self, path: &str) -> String {
        let rel = self
            .root
            .as_deref()
            .and_then(|r| path.strip_prefix(r))
            .and_then(|rest| rest.strip_prefix('/'))
            .filter(|rest| !rest.is_empty())
            .unwrap_or(path);
        // A file straight under the root keeps the root's own folder: `live/session_live.ex`,
        // never a bare name for a path that has a folder.
        let rel = match (rel.contains('/'), path.len() > rel.len()) {
            (false, true) => path
                .get(..path.len() - rel.len() - 1)
                .and_then(|dir| dir.rfind('/'))
                .and_then(|i| path.get(i + 1..))
                .unwrap_or(rel),
            _ => rel,
        };
        clip_left(rel, PATH_CHARS)
    }
}

/// `path` clipped from the left to about `max_chars` characters, cut after a `/` so whole
/// folder names and the file name stay; the file name is kept even when it alone is longer.
pub fn clip_left(path: &str, max_chars: usize) -> String {
    let n = path.chars().count();
    if n <= max_chars {
        return path.to_string();
    }
    // Byte offset where the last `max_chars - 2` characters start.
    let keep_from = path
        .char_indices()
        .nth(n - max_chars.saturating_sub(2))
        .map_or(0, |(i, _)| i);
    let name_start = path.rfind('/').map_or(0, |i| i + 1);
    let cut = match path.get(keep_from..).and_then(|rest| rest.find('/')) {
        Some(i) if keep_from + i < name_start => keep_from + i + 1,
        _ => name_start,
    };
    format!("…/{}", path.get(cut..).unwrap_or(path))
}

/// For each path, how many parent folders must be written with its file name so that no other
/// path of `paths` ends the same way (0 when its file name is unique).
#[cfg(any(test, feature = "ab"))]
pub fn parents_needed(paths: &[String]) -> Vec<usize> {
    let parts: Vec<Vec<&str>> = paths
        .iter()
        .map(|p| p.split('/').filter(|s| !s.is_empty()).rev().collect())
        .collect();
    parts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut need = 0;
            for (j, b) in parts.iter().enumerate() {
                if i == j || a == b {
                    continue;
                }
                let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
                if common > 0 {
                    need = need.max(common.min(a.len().saturating_sub(1)));
                }
            }
            need
        })
        .collect()
}

/// The boundary tails of `path`, shortest first: what follows each `/` from the right, then
/// `path` itself (`c.rs`, `b/c.rs`, `/b/c.rs` for `/b/c.rs`).
fn tails(path: &str) -> impl Iterator<Item = &str> {
    path.rmatch_indices('/')
        .filter_map(|(i, _)| path.get(i + 1..))
        .chain(std::iter::once(path))
}

/// For each of `paths`, the shortest form that tells it apart: its shortest tail on a `/`
/// boundary that keeps the parent folder with the file name (`live/session_live.ex`, never a
/// bare `session_live.ex` when the path has a folder) and that no other distinct path of
/// `paths` ends with on a `/` boundary; the whole path when every shorter tail is shared.
/// Equal paths get equal forms; distinct paths get distinct forms. For a digest that is short
/// of room: fewer characters per path let more paths fit.
pub fn distinct_tails(paths: &[&str]) -> Vec<String> {
    // How many distinct paths end with each tail.
    let mut distinct: Vec<&str> = paths.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut holders: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for p in &distinct {
        let mut seen: Vec<&str> = Vec::new();
        for t in tails(p) {
            if !seen.contains(&t) {
                seen.push(t);
                *holders.entry(t).or_default() += 1;
            }
        }
    }
    paths
        .iter()
        .map(|p| {
            let has_parent = p.trim_end_matches('/').contains('/');
            tails(p)
                // At least the parent folder and the file name when there is a folder.
                .filter(|t| !has_parent || t.trim_end_matches('/').contains('/') || t == p)
                .filter(|t| !t.is_empty())
                .find(|t| holders.get(t).copied() == Some(1))
                .unwrap_or(p)
                .to_string()
        })
        .collect()
}

/// True when `text` writes `path` by its file name and at least `parents` of its parent folders
/// (`session_live.ex` for 0, `live/session_live.ex` for 1), as a whole path word.
#[cfg(any(test, feature = "ab"))]
pub fn mentions_path(text: &str, path: &str, parents: usize) -> bool {
    let comps: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some(name) = comps.last() else {
        return false;
    };
    let need = parents.min(comps.len() - 1);
    let tail = comps[comps.len() - 1 - need..].join("/");
    let path_char = |c: char| c.is_alphanumeric() || "/._-~@+".contains(c);
    text.match_indices(tail.as_str()).any(|(i, _)| {
        let before = text.get(..i).and_then(|h| h.chars().next_back());
        let after = text.get(i + tail.len()..).and_then(|t| t.chars().next());
        let starts_ok = match before {
            None | Some('/') => true,
            Some(c) => !path_char(c),
        };
        let dot_then_word = after == Some('.')
            && text
                .get(i + tail.len() + 1..)
                .unwrap_or("")
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric);
        let ends_ok =
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '/') && !dot_then_word;
        starts_ok && ends_ok && !name.is_empty()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use foldhash::{HashMap, HashMapExt};
    use pretty_assertions::assert_eq;
    use proptest::strategy::Strategy;

    /// The style by its definition: every folder of every absolute path counted, the deepest
    /// that more than half of them lie under.
    fn counted_style(paths: &[String]) -> PathStyle {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        let mut absolute = 0usize;
        for p in paths.iter().filter(|p| p.starts_with('/')) {
            absolute += 1;
            for (i, _) in p.match_indices('/').skip(2) {
                if let Some(folder) = p.get(..i) {
                    *counts.entry(folder).or_default() += 1;
                }
            }
        }
        let root = counts
            .into_iter()
            .filter(|(_, n)| 2 * n > absolute)
            .max_by_key(|(dir, n)| (dir.len(), *n))
            .map(|(dir, _)| dir.to_string());
        PathStyle { root }
    }

    proptest::proptest! {
        /// The middle path's folders give the style counting every folder gives: paths from
        /// a few shared folders, relative ones, trailing and doubled `/`, non-ASCII names.
        #[test]
        fn the_style_is_the_one_counting_every_folder_gives(
            paths in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "/home/u/p/", "/home/u/p/lib/", "/home/u/", "/home/u/p", "/tmp/", "",
                        "/home//u/", "/",
                    ]),
                    proptest::collection::vec(
                        proptest::sample::select(vec!["/", "lib", "a.rs", "é", "x-y", "//", "b"]),
                        0..6,
                    ),
                ).prop_map(|(root, parts)| format!("{root}{}", parts.concat())),
                0..30,
            )
        ) {
            proptest::prop_assert_eq!(PathStyle::of(paths.iter().map(String::as_str)), counted_style(&paths));
        }
    }

    #[test]
    fn paths_under_the_common_root_are_written_relative() {
        let ps = [
            "/home/u/p/lib/a.ex",
            "/home/u/p/lib/web/b.ex",
            "/home/u/p/test/c.exs",
            "/tmp/x.log",
        ];
        let style = PathStyle::of(ps.iter().copied());
        assert_eq!(style.root.as_deref(), Some("/home/u/p"));
        assert_eq!(style.show("/home/u/p/lib/web/b.ex"), "lib/web/b.ex");
        assert_eq!(style.show("/tmp/x.log"), "/tmp/x.log");
    }

    #[test]
    fn long_paths_keep_the_file_name() {
        let p = "/home/USER/projects/spotter-worktrees/spotter-a0y/lib/spotter_web/live/session_live.ex";
        let shown = clip_left(p, 40);
        assert_eq!(shown, "…/lib/spotter_web/live/session_live.ex");
        assert!(shown.chars().count() <= 40);
        assert_eq!(
            clip_left("/a/averyveryverylongfilename.rs", 10),
            "…/averyveryverylongfilename.rs"
        );
    }

    /// True when `tail` is `path` or what follows one of its `/`.
    fn on_boundary(path: &str, tail: &str) -> bool {
        path == tail
            || (path.ends_with(tail)
                && path
                    .get(..path.len() - tail.len())
                    .is_some_and(|head| head.ends_with('/')))
    }

    proptest::proptest! {
        /// For any set of paths: each form is a tail of its path on a `/` boundary, keeps at
        /// least parent/name when the path has a parent, distinct paths get distinct forms,
        /// and no shorter tail would do (checked against every other path by `ends_with`).
        #[test]
        fn distinct_tails_are_boundary_tails_distinct_and_minimal(
            paths in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::sample::select(vec!["", "lib", "live", "a.ex", "b.ex", "é", "x"]),
                    1..5,
                ).prop_map(|parts| parts.join("/")),
                0..12,
            )
        ) {
            let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
            let forms = distinct_tails(&refs);
            proptest::prop_assert_eq!(forms.len(), paths.len());
            for (i, (p, f)) in paths.iter().zip(&forms).enumerate() {
                proptest::prop_assert!(on_boundary(p, f), "{f:?} is not a tail of {p:?}");
                if p.trim_end_matches('/').contains('/') {
                    proptest::prop_assert!(f.trim_end_matches('/').contains('/') || f == p);
                }
                let shared = |t: &str| paths.iter().any(|q| q != p && on_boundary(q, t));
                for (j, (q, g)) in paths.iter().zip(&forms).enumerate() {
                    if i != j && p != q {
                        proptest::prop_assert_ne!(f, g);
                    }
                }
                // Minimal: every shorter boundary tail with parent/name is shared (or the form
                // is the whole path, which nothing shorter may stand for).
                if !shared(f) {
                    for k in (1..f.len()).filter(|&k| f.is_char_boundary(k)) {
                        let (head, t) = f.split_at(k);
                        let long_enough = !p.trim_end_matches('/').contains('/')
                            || t.trim_end_matches('/').contains('/');
                        if head.ends_with('/') && long_enough && !t.is_empty() {
                            proptest::prop_assert!(shared(t), "{t:?} is shorter than {f:?} and unique");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_tail_keeps_its_folder_and_tells_same_names_apart() {
        let ps = [
            "/home/u/p/lib/spotter_web/live/session_live.ex",
            "/home/u/p/lib/a/mod.rs",
            "/home/u/p/lib/b/mod.rs",
            "/home/u/p/x/lib/b/mod.rs",
            "README.md",
        ];
        assert_eq!(
            distinct_tails(&ps),
            vec![
                "live/session_live.ex",
                "a/mod.rs",
                "p/lib/b/mod.rs",
                "x/lib/b/mod.rs",
                "README.md"
            ]
        );
    }

    #[test]
    fn parents_are_needed_only_to_tell_files_apart() {
        let ps = vec![
            "lib/a/mod.rs".to_string(),
            "lib/b/mod.rs".to_string(),
            "src/main.rs".to_string(),
        ];
        assert_eq!(parents_needed(&ps), vec![1, 1, 0]);
    }

    #[test]
    fn a_mention_needs_the_file_name_as_a_whole_word() {
        assert!(mentions_path(
            "edited live/session_live.ex today",
            "/x/live/session_live.ex",
            1
        ));
        assert!(mentions_path(
            "edited session_live.ex.",
            "/x/live/session_live.ex",
            0
        ));
        assert!(!mentions_path(
            "edited session_live.exs",
            "/x/live/session_live.ex",
            0
        ));
        assert!(!mentions_path(
            "edited other/session_live.ex",
            "/x/live/session_live.ex",
            1
        ));
        assert!(!mentions_path(
            "my_session_live.ex",
            "/x/live/session_live.ex",
            0
        ));
    }
}
