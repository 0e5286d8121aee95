//! Fuzzy ranking of workspace paths for `@path` completion.
//!
//! The matcher is nucleo's (the one Helix uses), configured for paths: a match right after a
//! `/` (a segment start) and at the very start earns its boundary bonus, consecutive matches
//! earn more than scattered ones. The query takes fzf's
//! syntax (words separated by spaces must all match; `^prefix`, `suffix$`, `'exact` and
//! `!not`), because that is what programmers already type into pickers.
//!
//! On top of nucleo's score, what programmers mean when they type a name:
//!
//! - **The file name counts extra.** The query is scored against the whole path and again
//!   against its last segment, and half of the second is added, so `main` puts `src/main.rs`
//!   above `main_module/lib.rs`, whose match is only in a directory name. Half, so that
//!   segment initials still win: `fb` prefers `foo/bar.rs` to `xfoobar.rs`.
//! - **Open and recently edited files are boosted** by a percentage of their score (so a boost
//!   reorders comparable matches but does not lift a poor match over a good one), and come
//!   first when the query is empty.
//! - **Case never hides a path, capitals prefer it.** Matching ignores case (`@CONS` finds
//!   `rich/console.py`: a programmer who types capitals rarely means "nothing else"), and a
//!   query with capitals boosts the paths whose case matches it too, by
//!   [`CASE_BOOST_PERCENT`], so `@Parser` puts `src/Parser.rs` above `src/parser_test.rs`.
//! - **Ties are broken the same way every time**: shorter paths first, then byte order. A
//!   completion list that reshuffles between keystrokes is worse than a slightly wrong one.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet, VecDeque};

use nucleo_matcher::pattern::{AtomKind, CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};
use serde::Serialize;

use super::entry::{EntryKind, insert_text, split_key};

/// Recently edited files remembered for boosting.
pub const MAX_RECENT: usize = 32;
/// Boost of an open file, in percent of its score.
pub const OPEN_BOOST_PERCENT: u32 = 25;
/// Boost of the most recently edited file, in percent; each older one gets a point less
/// (half a point per step, rounded down).
pub const RECENT_BOOST_PERCENT: u32 = 20;

/// Boost of a path whose case matches a query with capitals, in percent of its score.
pub const CASE_BOOST_PERCENT: u32 = 50;

/// One ranked path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// `/`-separated path from the workspace root; a directory has no trailing `/` here.
    pub path: String,
    /// Whether the path is a file or a directory.
    pub kind: EntryKind,
    /// Higher is better; only comparable within one query.
    pub score: u32,
}

impl Candidate {
    /// The path as shown in a list: directories end in `/`.
    pub fn label(&self) -> String {
        match self.kind {
            EntryKind::File => self.path.clone(),
            EntryKind::Directory => format!("{}/", self.path),
        }
    }

    /// What completing this candidate inserts into a prompt: `@path`, or `@"…"` when needed.
    pub fn insert_text(&self) -> String {
        insert_text(&self.path, self.kind)
    }
}

/// Files the programmer is working on, which rank higher.
#[derive(Clone, Debug, Default)]
pub(crate) struct Boosts {
    open: HashSet<String>,
    /// Most recent first, at most [`MAX_RECENT`].
    recent: VecDeque<String>,
}

impl Boosts {
    pub(crate) fn touch(&mut self, path: &str) {
        if let Some(position) = self.recent.iter().position(|recent| recent == path) {
            self.recent.remove(position);
        }
        self.recent.push_front(path.to_owned());
        self.recent.truncate(MAX_RECENT);
    }

    pub(crate) fn set_open(&mut self, open: HashSet<String>) {
        self.open = open;
    }

    fn is_empty(&self) -> bool {
        self.open.is_empty() && self.recent.is_empty()
    }

    /// The boost of `path`, in percent.
    fn percent(&self, path: &str) -> u32 {
        let mut percent = 0;
        if self.open.contains(path) {
            percent += OPEN_BOOST_PERCENT;
        }
        if let Some(position) = self.recent.iter().position(|recent| recent == path) {
            percent += RECENT_BOOST_PERCENT - position as u32 / 2;
        }
        percent
    }
}

/// Best first: higher score, then shorter path, then byte order (keys are unique, so the
/// order is total and the result does not depend on the order keys came in).
fn better(a: &(u32, &str), b: &(u32, &str)) -> Ordering {
    b.0.cmp(&a.0)
        .then_with(|| a.1.len().cmp(&b.1.len()))
        .then_with(|| a.1.cmp(b.1))
}

/// The last segment of an index key (`src/main.rs` → `main.rs`, `src/app/` → `app/`).
fn basename(key: &str) -> &str {
    let trimmed = key.strip_suffix('/').unwrap_or(key);
    match trimmed.rfind('/') {
        Some(slash) => &key[slash + 1..],
        None => key,
    }
}

/// One index key as the ranker sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Key<'a> {
    pub(crate) text: &'a str,
    pub(crate) facts: KeyFacts,
    /// Where the index keeps it; reported back for the keys that match.
    pub(crate) slot: u32,
}

/// What the ranker knows about a key without reading it, computed once when the key is
/// indexed. Most keys of a 100k-path workspace do not match a given query, and the masks
/// reject most of those for the price of one `and`, before nucleo is asked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyFacts {
    /// [`char_mask`] of the whole key.
    path_mask: u64,
    /// [`char_mask`] of the last segment.
    name_mask: u64,
    /// Byte offset of the last segment.
    name_start: u32,
    ascii: bool,
}

impl KeyFacts {
    pub(crate) fn path_mask(&self) -> u64 {
        self.path_mask
    }

    pub(crate) fn of(key: &str) -> KeyFacts {
        let name_start = key.len() - basename(key).len();
        KeyFacts {
            path_mask: char_mask(key),
            name_mask: char_mask(&key[name_start..]),
            name_start: name_start as u32,
            ascii: key.is_ascii(),
        }
    }
}

/// The set of characters in `text`, folded into 64 bits: letters case-folded, digits, and
/// other ASCII characters sharing the remaining bits. Any character outside ASCII sets every
/// bit, so the mask never rejects text that Unicode normalization could make match. A text
/// can contain a needle only if its mask contains the needle's mask.
fn char_mask(text: &str) -> u64 {
    let mut mask = 0u64;
    for byte in text.bytes() {
        let bit = match byte {
            b'a'..=b'z' => byte - b'a',
            b'A'..=b'Z' => byte - b'A',
            b'0'..=b'9' => 26 + byte - b'0',
            0..=0x7f => 36 + byte % 28,
            _ => return u64::MAX,
        };
        mask |= 1 << bit;
    }
    mask
}

/// Keys one thread scores at least: below this, starting a thread costs more than it saves.
pub(crate) const MIN_KEYS_PER_THREAD: usize = 16_384;

/// How a query scores one key.
pub(crate) struct Scorer {
    /// The query, matched ignoring case.
    pattern: Pattern,
    /// The query matched with its case, when it has capitals: a key it matches too gets
    /// [`CASE_BOOST_PERCENT`].
    respecting_case: Option<Pattern>,
    /// Per atom, whether its path score is taken greedily (see [`Scorer::path_score`]).
    greedy: Vec<bool>,
    /// The characters every matching key contains (the positive atoms' needles), or 0 when a
    /// needle is not ASCII and nothing can be ruled out this way.
    mask: u64,
    /// An upper bound of what the file name can add to a score: half of the best score any
    /// text could get, `25 n + 9` per atom of `n` characters (16 per matched character, at most
    /// 9 of bonus each, the first one doubled).
    name_cap: u32,
}

impl Scorer {
    pub(crate) fn new(query: &str) -> Scorer {
        let pattern = Pattern::parse(query, CaseMatching::Ignore, Normalization::Smart);
        let respecting_case = query
            .chars()
            .any(char::is_uppercase)
            .then(|| Pattern::parse(query, CaseMatching::Respect, Normalization::Smart));
        let greedy = pattern
            .atoms
            .iter()
            .map(|atom| {
                matches!(atom.needle_text(), Utf32Str::Ascii(_))
                    && atom.kind == AtomKind::Fuzzy
                    && !atom.negative
            })
            .collect();
        let name_cap = pattern
            .atoms
            .iter()
            .filter(|atom| !atom.negative)
            .map(|atom| 25 * atom.needle_text().len() as u32 + 9)
            .sum::<u32>()
            / 2;
        let mut mask = 0;
        for atom in pattern.atoms.iter().filter(|atom| !atom.negative) {
            match atom.needle_text() {
                Utf32Str::Ascii(needle) => {
                    mask |= char_mask(std::str::from_utf8(needle).unwrap_or_default());
                }
                Utf32Str::Unicode(_) => {
                    mask = 0;
                    break;
                }
            }
        }
        // A mask of 0 must mean "no filtering": every key contains the empty set anyway.
        Scorer {
            pattern,
            respecting_case,
            greedy,
            mask,
            name_cap,
        }
    }

    /// The characters every matching key contains (see [`KeyFacts`]).
    pub(crate) fn mask(&self) -> u64 {
        self.mask
    }

    fn matches_all(&self) -> bool {
        self.pattern.atoms.is_empty()
    }

    /// The score of the whole path, or `None` when it does not match.
    ///
    /// A plain ASCII word is matched greedily (fzf's first algorithm: the first occurrence,
    /// then the shortest window ending there), which is linear in the path's length, instead
    /// of with nucleo's optimal alignment, which is about five times slower on long paths and
    /// is what made short queries over 100k paths slow. The file name, short, is still scored
    /// optimally ([`Scorer::name_score`]): that is where alignment matters most.
    fn path_score(&self, key: Key<'_>, matcher: &mut Matcher, buf: &mut Vec<char>) -> Option<u32> {
        if key.facts.path_mask & self.mask != self.mask {
            return None;
        }
        let path = if key.facts.ascii {
            Utf32Str::Ascii(key.text.as_bytes())
        } else {
            Utf32Str::new(key.text, buf)
        };
        let mut total = 0;
        for (atom, greedy) in self.pattern.atoms.iter().zip(&self.greedy) {
            total += u32::from(if *greedy {
                // What `Atom::score` sets for an ASCII atom that ignores case.
                matcher.config.ignore_case = true;
                matcher.config.normalize = true;
                matcher.fuzzy_match_greedy(path, atom.needle_text())?
            } else {
                atom.score(path, matcher)?
            });
        }
        Some(total)
    }

    /// [`CASE_BOOST_PERCENT`] when the query has capitals and `key` matches it with its case
    /// too, else 0.
    fn case_percent(&self, key: Key<'_>, matcher: &mut Matcher, buf: &mut Vec<char>) -> u32 {
        let Some(respecting_case) = &self.respecting_case else {
            return 0;
        };
        let path = if key.facts.ascii {
            Utf32Str::Ascii(key.text.as_bytes())
        } else {
            Utf32Str::new(key.text, buf)
        };
        let matches = respecting_case
            .atoms
            .iter()
            .all(|atom| atom.score(path, matcher).is_some());
        if matches { CASE_BOOST_PERCENT } else { 0 }
    }

    /// What the file name adds: half of its own score.
    fn name_score(&self, key: Key<'_>, matcher: &mut Matcher, buf: &mut Vec<char>) -> u32 {
        if key.facts.name_mask & self.mask != self.mask {
            return 0;
        }
        let name = &key.text[key.facts.name_start as usize..];
        let name = if key.facts.ascii {
            Utf32Str::Ascii(name.as_bytes())
        } else {
            Utf32Str::new(name, buf)
        };
        self.pattern.score(name, matcher).unwrap_or(0) / 2
    }

    /// The `limit` best keys of one chunk, unordered.
    fn best<'a>(
        &self,
        keys: impl Iterator<Item = Key<'a>>,
        boosts: &Boosts,
        limit: usize,
    ) -> ChunkResult<'a> {
        let mut matched = Vec::new();
        let mut matcher = Matcher::new(Config::DEFAULT.match_paths());
        let (mut path_buf, mut name_buf) = (Vec::new(), Vec::new());
        let match_all = self.matches_all();
        let with_boosts = !boosts.is_empty();
        let mut scored = Vec::new();
        // The `limit` best scores so far: a key that cannot reach the lowest of them is
        // dropped without scoring its name.
        let mut best_scores: BinaryHeap<Reverse<u32>> = BinaryHeap::with_capacity(limit + 1);
        for key in keys {
            let mut percent = if with_boosts {
                boosts.percent(split_key(key.text).0)
            } else {
                0
            };
            let score = if match_all {
                // With an empty query every score is 0; the boost alone orders the keys.
                percent
            } else {
                let Some(path_score) = self.path_score(key, &mut matcher, &mut path_buf) else {
                    continue;
                };
                matched.push(key.slot);
                percent += self.case_percent(key, &mut matcher, &mut path_buf);
                let boosted = |score: u32| score * (100 + percent) / 100;
                let threshold = match best_scores.peek() {
                    Some(&Reverse(lowest)) if best_scores.len() >= limit => lowest,
                    _ => 0,
                };
                if boosted(path_score + self.name_cap) < threshold {
                    continue;
                }
                boosted(path_score + self.name_score(key, &mut matcher, &mut name_buf))
            };
            best_scores.push(Reverse(score));
            if best_scores.len() > limit {
                best_scores.pop();
            }
            scored.push((score, key.text));
            if scored.len() >= 4 * limit.max(64) {
                keep_best(&mut scored, limit);
            }
        }
        keep_best(&mut scored, limit);
        (scored, matched)
    }
}

/// What one chunk found: its best keys with their scores, and the slots of all that matched.
type ChunkResult<'a> = (Vec<(u32, &'a str)>, Vec<u32>);

/// Keep the `limit` best of `scored`, in no particular order.
fn keep_best(scored: &mut Vec<(u32, &str)>, limit: usize) {
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit - 1, better);
        scored.truncate(limit);
    }
}

/// What a query found.
pub(crate) struct Ranked {
    /// The best, best first.
    pub(crate) candidates: Vec<Candidate>,
    /// The slots of every key that matched (empty for an empty query), in the order the
    /// chunks were given: what the next, longer query needs to look at.
    pub(crate) matched: Vec<u32>,
}

/// The `limit` best index keys for the query of `scorer` (normalized by the index), best
/// first. Each chunk of keys is scored on its own thread when there are several.
pub(crate) fn rank<'a, I>(scorer: &Scorer, chunks: Vec<I>, boosts: &Boosts, limit: usize) -> Ranked
where
    I: Iterator<Item = Key<'a>> + Send,
{
    if limit == 0 {
        return Ranked {
            candidates: Vec::new(),
            matched: Vec::new(),
        };
    }
    let results: Vec<ChunkResult<'_>> = if chunks.len() <= 1 {
        chunks
            .into_iter()
            .map(|chunk| scorer.best(chunk, boosts, limit))
            .collect()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .into_iter()
                .map(|chunk| scope.spawn(move || scorer.best(chunk, boosts, limit)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("a ranking thread panicked"))
                .collect()
        })
    };
    let mut scored = Vec::new();
    let mut matched = Vec::new();
    for (best, slots) in results {
        scored.extend(best);
        matched.extend(slots);
    }
    keep_best(&mut scored, limit);
    scored.sort_unstable_by(better);
    let candidates = scored
        .into_iter()
        .map(|(score, key)| {
            let (path, kind) = split_key(key);
            Candidate {
                path: path.to_owned(),
                kind,
                score,
            }
        })
        .collect();
    Ranked {
        candidates,
        matched,
    }
}

#[cfg(test)]
mod tests;
