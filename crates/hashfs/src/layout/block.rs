//! Block numbers. A logical block ([`Lblk`]) is a file's byte offset divided by the block
//! size; a physical block ([`Pblk`]) is a data block of the image (for HashFS, the table
//! slot that holds the block's key: slot = block). They are different kinds of number and
//! the types keep them apart; arithmetic that stays inside one kind (a block plus a count,
//! the distance between two blocks) is defined, and the raw number is `.0`.

#![forbid(unsafe_code)]

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A file's logical block: byte offset / [`super::BLOCK_BYTES`]. Below 2^32 inside a file
/// ([`super::MAX_FILE_BYTES`]); an exclusive range end may equal 2^32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lblk(pub u64);

/// A physical data block of the image (HashFS: a table slot).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pblk(pub u64);

impl Lblk {
    /// The block holding byte `off` of a file.
    pub fn of_byte(off: u64) -> Lblk {
        Lblk(off / super::BLOCK_BYTES)
    }

    /// The block number as the 32-bit field the hash-table keys hold; `None` past the
    /// largest file (which no validated offset reaches).
    pub fn to_u32(self) -> Option<u32> {
        u32::try_from(self.0).ok()
    }
}

macro_rules! block_arith {
    ($t:ident) => {
        impl Add<u64> for $t {
            type Output = $t;
            fn add(self, n: u64) -> $t {
                $t(self.0 + n)
            }
        }
        impl AddAssign<u64> for $t {
            fn add_assign(&mut self, n: u64) {
                self.0 += n;
            }
        }
        /// The number of blocks from `rhs` up to `self`.
        impl Sub for $t {
            type Output = u64;
            fn sub(self, rhs: $t) -> u64 {
                self.0 - rhs.0
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}
block_arith!(Lblk);
block_arith!(Pblk);

/// A run of a file's blocks: logical blocks `[lblk, lblk + len)` stored in physical blocks
/// `[pblk, pblk + len)`. The one extent type of the mapping layer: lookups return it,
/// inserts take it, walks report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub lblk: Lblk,
    pub pblk: Pblk,
    pub len: u64,
}

impl Extent {
    /// The end of the logical range (exclusive).
    pub fn lblk_end(&self) -> Lblk {
        self.lblk + self.len
    }

    /// Whether the extent maps `l`.
    pub fn contains(&self, l: Lblk) -> bool {
        self.lblk <= l && l < self.lblk_end()
    }

    /// The part of the extent from logical block `l` on (`l` inside it).
    pub fn from_lblk(&self, l: Lblk) -> Extent {
        debug_assert!(self.contains(l));
        let skip = l - self.lblk;
        Extent { lblk: l, pblk: self.pblk + skip, len: self.len - skip }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extent_arithmetic() {
        let e = Extent { lblk: Lblk(10), pblk: Pblk(100), len: 5 };
        assert!(e.contains(Lblk(10)) && e.contains(Lblk(14)) && !e.contains(Lblk(15)) && !e.contains(Lblk(9)));
        assert_eq!(e.from_lblk(Lblk(12)), Extent { lblk: Lblk(12), pblk: Pblk(102), len: 3 });
        assert_eq!(Lblk(7) - Lblk(3), 4);
        assert_eq!(Lblk((1 << 32) - 1).to_u32(), Some(u32::MAX));
        assert_eq!(Lblk(1 << 32).to_u32(), None);
        assert_eq!(Lblk::of_byte(8191), Lblk(1));
    }
}
