//! The byte scanner of [`super::scan`]: where a request body's message array and its items lie,
//! found by walking the bytes (strings skipped with `memchr` to their closing quote) without
//! parsing or validating them. It depends on nothing but the standard library and `memchr`,
//! so `benches/slices.rs` builds it as it is and times it against serde_json's `RawValue`
//! spans (`oracle.rs`).

use std::ops::Range;

/// Deepest nesting the scanner accepts (serde_json refuses past 128 levels; an item parsed on
/// its own is two levels shallower than in the body, so a margin keeps both answers the same).
pub const MAX_DEPTH: usize = 120;

/// The message array of `body` (from its `[` to its `]` inclusive) and each of its items
/// (without surrounding whitespace), in byte offsets of `body`; `key` names the array in a
/// request object (`messages`, `input`, `contents`), and a bare array is the array itself.
/// `None` in the cases [`super::scan`] lists.
pub fn spans(body: &[u8], key: &str) -> Option<(Range<usize>, Vec<Range<usize>>)> {
    let mut s = Scanner { b: body, i: 0 };
    s.ws();
    let spans = match s.peek()? {
        b'[' => {
            let start = s.i;
            let items = s.array_items()?;
            (start..s.i, items)
        }
        b'{' => {
            s.i += 1;
            s.depth_check(1)?;
            let mut found = None;
            s.ws();
            if s.peek()? == b'}' {
                return None;
            }
            loop {
                s.ws();
                let name = s.key()?;
                s.ws();
                s.expect(b':')?;
                s.ws();
                if name == key {
                    if found.is_some() || s.peek()? != b'[' {
                        return None;
                    }
                    let start = s.i;
                    let items = s.array_items()?;
                    found = Some((start..s.i, items));
                } else {
                    s.value(1)?;
                }
                s.ws();
                match s.next()? {
                    b',' => continue,
                    b'}' => break,
                    _ => return None,
                }
            }
            found?
        }
        _ => return None,
    };
    s.ws();
    (s.i == body.len()).then_some(spans)
}

/// A byte cursor over JSON that finds where values end without parsing them (right for valid
/// JSON; what it passes over unchecked is checked by serde_json afterwards).
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn depth_check(&self, depth: usize) -> Option<()> {
        (depth <= MAX_DEPTH).then_some(())
    }

    /// Skips JSON whitespace (space, tab, newline, carriage return: RFC 8259 section 2).
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// Skips a string starting at its opening quote; the cursor ends past the closing quote.
    fn string(&mut self) -> Option<()> {
        self.expect(b'"')?;
        let start = self.i;
        loop {
            let rest = self.b.get(self.i..)?;
            let at = self.i + memchr::memchr(b'"', rest)?;
            self.i = at + 1;
            // Inside a string a backslash only starts an escape, so a quote is escaped when
            // an odd number of backslashes runs up to it (`\"` yes, `\\"` no). Searching
            // for quotes alone does not stop at every `\n` of a tool's output.
            let run = self
                .b
                .get(start..at)?
                .iter()
                .rev()
                .take_while(|&&c| c == b'\\')
                .count();
            if run % 2 == 0 {
                return Some(());
            }
        }
    }

    /// An object key: the decoded string (escapes resolved by serde_json when there are any).
    fn key(&mut self) -> Option<String> {
        let start = self.i;
        self.string()?;
        let raw = self.b.get(start..self.i)?;
        let inner = raw.get(1..raw.len() - 1)?;
        if inner.contains(&b'\\') {
            serde_json::from_slice(raw).ok()
        } else {
            std::str::from_utf8(inner).ok().map(str::to_string)
        }
    }

    /// Skips one value at nesting `depth` (of its container).
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'{' | b'[' => {
                let mut level = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => {
                            level += 1;
                            self.depth_check(depth + level)?;
                        }
                        b'}' | b']' => {
                            level = level.checked_sub(1)?;
                            if level == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                let start = self.i;
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }

    /// The items of the array starting at the cursor (`[`); the cursor ends past its `]`.
    fn array_items(&mut self) -> Option<Vec<Range<usize>>> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(items);
        }
        loop {
            self.ws();
            let start = self.i;
            // Items sit at depth 2 in a request object (1 in a bare array); counted as 2.
            self.value(2)?;
            items.push(start..self.i);
            self.ws();
            match self.next()? {
                b',' => continue,
                b']' => return Some(items),
                _ => return None,
            }
        }
    }
}
