//! The index keys in one buffer, the layout every query scans, and the last query's matches.

use std::collections::BTreeMap;

use super::rank::{Key, KeyFacts};

/// The index keys one after another in a single buffer, for queries. A query looks at every
/// key: scanning one buffer, with what the ranker needs to know about each key computed once
/// when it is added ([`KeyFacts`]), costs much less than following a tree's pointers to 100k
/// separate strings. New keys are appended; removed ones leave a hole until holes make up a
/// quarter of the slots, when the buffer is rewritten.
#[derive(Debug, Default)]
pub(super) struct FlatKeys {
    text: String,
    /// Where each key is in `text`, and what the ranker wants to know about it without
    /// looking at the text; a removed key has length [`FlatKeys::DEAD`].
    pub(super) slots: Vec<Slot>,
    /// Each slot's `facts.path_mask` again (0 once removed), densely: a query first runs
    /// through this array alone, and most keys end there.
    path_masks: Vec<u64>,
    n_dead: usize,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    start: u32,
    len: u32,
    facts: KeyFacts,
}

impl FlatKeys {
    const DEAD: u32 = u32::MAX;

    pub(super) fn with_capacity(n_keys: usize, n_bytes: usize) -> FlatKeys {
        FlatKeys {
            text: String::with_capacity(n_bytes),
            slots: Vec::with_capacity(n_keys),
            path_masks: Vec::with_capacity(n_keys),
            n_dead: 0,
        }
    }

    pub(super) fn push(&mut self, key: &str) -> u32 {
        let start = self.text.len() as u32;
        self.text.push_str(key);
        let facts = KeyFacts::of(key);
        self.slots.push(Slot {
            start,
            len: key.len() as u32,
            facts,
        });
        self.path_masks.push(facts.path_mask());
        (self.slots.len() - 1) as u32
    }

    pub(super) fn kill(&mut self, slot: u32) {
        self.slots[slot as usize].len = FlatKeys::DEAD;
        self.path_masks[slot as usize] = 0;
        self.n_dead += 1;
    }

    pub(super) fn needs_compaction(&self) -> bool {
        self.n_dead > 1024 && self.n_dead * 4 > self.slots.len()
    }

    /// Rewrite the buffer without holes, renumbering the slots in `entries`.
    pub(super) fn compact(&mut self, entries: &mut BTreeMap<Box<str>, u32>) {
        let mut fresh = FlatKeys {
            text: String::with_capacity(self.text.len()),
            slots: Vec::with_capacity(entries.len()),
            path_masks: Vec::with_capacity(entries.len()),
            n_dead: 0,
        };
        for (key, slot) in entries.iter_mut() {
            *slot = fresh.push(key);
        }
        *self = fresh;
    }

    /// The live keys among `slots` (all of them when `None`) whose characters include all of
    /// `mask`, in `n` runs of about equal length, for ranking on `n` threads.
    pub(super) fn chunks<'a>(
        &'a self,
        slots: Option<&'a [u32]>,
        n: usize,
        mask: u64,
    ) -> Vec<KeyIter<'a>> {
        let total = slots.map_or(self.slots.len(), <[u32]>::len);
        let size = total.div_ceil(n.max(1)).max(1);
        (0..total)
            .step_by(size)
            .map(|from| {
                let to = (from + size).min(total);
                let indices = match slots {
                    Some(slots) => Indices::Listed(slots[from..to].iter()),
                    None => Indices::Run {
                        base: from,
                        masks: &self.path_masks[from..to],
                        position: 0,
                    },
                };
                KeyIter {
                    flat: self,
                    mask,
                    indices,
                }
            })
            .collect()
    }

    pub(super) fn heap_size(&self) -> usize {
        self.text.capacity()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.path_masks.capacity() * std::mem::size_of::<u64>()
    }
}

/// Keys of one chunk for the ranker: the scan that every query makes, kept a plain loop over
/// the dense masks.
pub(super) struct KeyIter<'a> {
    flat: &'a FlatKeys,
    mask: u64,
    indices: Indices<'a>,
}

enum Indices<'a> {
    /// Slots `base..base + masks.len()`, of which `position` are done.
    Run {
        base: usize,
        masks: &'a [u64],
        position: usize,
    },
    /// The slots the last query matched.
    Listed(std::slice::Iter<'a, u32>),
}

impl<'a> Iterator for KeyIter<'a> {
    type Item = Key<'a>;

    fn next(&mut self) -> Option<Key<'a>> {
        let mask = self.mask;
        loop {
            let index = match &mut self.indices {
                Indices::Run {
                    base,
                    masks,
                    position,
                } => {
                    let found = masks[*position..]
                        .iter()
                        .position(|&key_mask| key_mask & mask == mask)?;
                    let index = *position + found;
                    *position = index + 1;
                    *base + index
                }
                Indices::Listed(slots) => {
                    let index = *slots.next()? as usize;
                    if self.flat.path_masks[index] & mask != mask {
                        continue;
                    }
                    index
                }
            };
            let slot = &self.flat.slots[index];
            if slot.len == FlatKeys::DEAD {
                continue;
            }
            let start = slot.start as usize;
            return Some(Key {
                text: &self.flat.text[start..start + slot.len as usize],
                facts: slot.facts,
                slot: index as u32,
            });
        }
    }
}

/// What the last query matched. The next keystroke usually extends the query, and a longer
/// query can only match a subset of what the shorter one matched, so it looks at those keys
/// only: the first keystroke scans the index, the following ones a shrinking part of it.
#[derive(Debug)]
pub(super) struct LastQuery {
    /// The index generation it was computed at; any change to the index voids it.
    pub(super) generation: u64,
    pub(super) query: String,
    pub(super) matched: Vec<u32>,
}

impl LastQuery {
    /// Whether `query`'s matches are all among this one's. Appending characters narrows every
    /// fzf-syntax form except negation (`!abc` excludes less than `!ab`).
    pub(super) fn narrows_to(&self, generation: u64, query: &str) -> bool {
        self.generation == generation
            && !self.query.is_empty()
            && query.starts_with(&self.query)
            && !query.contains('!')
    }
}
