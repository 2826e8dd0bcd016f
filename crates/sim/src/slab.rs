//! A generational slab: stable `u32` indices with a generation so that a stale
//! handle (to a freed and reused slot) is recognised instead of aliasing.

pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

struct Slot<T> {
    gen: u32,
    val: Option<T>,
}

/// Index and generation of a slab entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub idx: u32,
    pub gen: u32,
}

impl<T> Slab<T> {
    pub fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    pub fn insert(&mut self, val: T) -> Key {
        self.len += 1;
        if let Some(idx) = self.free.pop() {
            let slot = &mut self.slots[idx as usize];
            slot.val = Some(val);
            Key { idx, gen: slot.gen }
        } else {
            let idx =
                u32::try_from(self.slots.len()).expect("slab overflow: more than 2^32 entries");
            self.slots.push(Slot {
                gen: 0,
                val: Some(val),
            });
            Key { idx, gen: 0 }
        }
    }

    /// The key the next [`Slab::insert`] will return.
    pub fn next_key(&self) -> Key {
        match self.free.last() {
            Some(&idx) => Key {
                idx,
                gen: self.slots[idx as usize].gen,
            },
            None => Key {
                idx: u32::try_from(self.slots.len())
                    .expect("slab overflow: more than 2^32 entries"),
                gen: 0,
            },
        }
    }

    pub fn get(&self, key: Key) -> Option<&T> {
        match self.slots.get(key.idx as usize) {
            Some(s) if s.gen == key.gen => s.val.as_ref(),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        match self.slots.get_mut(key.idx as usize) {
            Some(s) if s.gen == key.gen => s.val.as_mut(),
            _ => None,
        }
    }

    pub fn remove(&mut self, key: Key) -> Option<T> {
        let slot = self.slots.get_mut(key.idx as usize)?;
        if slot.gen != key.gen || slot.val.is_none() {
            return None;
        }
        slot.gen = slot.gen.wrapping_add(1);
        self.free.push(key.idx);
        self.len -= 1;
        slot.val.take()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Live entries in index order (deterministic).
    pub fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.val.as_ref().map(|v| {
                (
                    Key {
                        idx: i as u32,
                        gen: s.gen,
                    },
                    v,
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_key_is_rejected() {
        let mut s = Slab::new();
        let a = s.insert(1);
        assert_eq!(s.remove(a), Some(1));
        let next = s.next_key();
        let b = s.insert(2);
        assert_eq!(b, next);
        assert_eq!(b.idx, a.idx);
        assert!(s.get(a).is_none());
        assert_eq!(s.get(b), Some(&2));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.len(), 1);
        let next = s.next_key();
        assert_eq!(s.insert(3), next);
        assert_eq!(next.idx, 1);
    }
}
