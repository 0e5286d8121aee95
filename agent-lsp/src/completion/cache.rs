//! Recent suggestions by the text before and after the cursor, so that typing through a
//! suggestion costs no request: when the person types the characters the suggestion starts
//! with, the text after the cursor is unchanged and the text before it has grown by exactly
//! those characters, and the answer is the rest of the suggestion.

use std::collections::VecDeque;

use super::edit::Shaped;

/// How many suggestions are kept (over every document).
const ENTRIES: usize = 64;

struct Entry {
    /// The document (its URI) the suggestion was made for.
    document: String,
    before: String,
    after: String,
    shaped: Shaped,
}

/// The last `ENTRIES` suggestions, newest last.
#[derive(Default)]
pub struct Cache {
    entries: VecDeque<Entry>,
}

impl Cache {
    /// The suggestion for `before` | `after` in `document`: one made exactly here, or one made
    /// a few characters earlier that those characters typed through, without them. A
    /// suggestion typed through completely is no answer (there is nothing left to suggest).
    pub fn get(&self, document: &str, before: &str, after: &str) -> Option<Shaped> {
        self.entries.iter().rev().find_map(|entry| {
            if entry.document != document || entry.after != after {
                return None;
            }
            let typed = before.strip_prefix(entry.before.as_str())?;
            let left = entry.shaped.insert.strip_prefix(typed)?;
            (!left.is_empty() && left.len() > entry.shaped.replaced).then(|| Shaped {
                insert: left.to_owned(),
                replaced: entry.shaped.replaced,
            })
        })
    }

    pub fn put(&mut self, document: &str, before: &str, after: &str, shaped: &Shaped) {
        if self.entries.len() == ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry {
            document: document.to_owned(),
            before: before.to_owned(),
            after: after.to_owned(),
            shaped: shaped.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typing_through_a_suggestion_answers_with_the_rest() {
        let mut cache = Cache::default();
        let shaped = Shaped {
            insert: "width, height)".into(),
            replaced: 1,
        };
        cache.put("a.py", "x = area(", ")\n", &shaped);
        assert_eq!(cache.get("a.py", "x = area(", ")\n"), Some(shaped));
        assert_eq!(
            cache.get("a.py", "x = area(wid", ")\n").unwrap().insert,
            "th, height)"
        );
        // Typed something else, in another document, or changed what follows: no answer.
        assert_eq!(cache.get("a.py", "x = area(q", ")\n"), None);
        assert_eq!(cache.get("b.py", "x = area(", ")\n"), None);
        assert_eq!(cache.get("a.py", "x = area(", "]\n"), None);
        // Typed through up to the replaced `)`: nothing new is left.
        assert_eq!(cache.get("a.py", "x = area(width, height", ")\n"), None);
    }
}
