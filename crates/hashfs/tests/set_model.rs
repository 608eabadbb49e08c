//! The shared region's participant sets (`share/participant_set.rs`: who holds an open
//! file description, who has an inode open) under loom: their protocol
//! (`hashfs::share::set_protocol`) on loom's atomics, every interleaving of two
//! participants whose bits lie in different words of a set and every outcome the memory
//! orderings allow. A set of more than one word is read word by word, never as one
//! snapshot; checked: two participants claiming an empty set never both get it, and two
//! holders letting go at once never both find the other still there (a description whose
//! last holders each thought the other held it would keep its OFD locks for good).

use hashfs::share::{set_protocol, Participant};
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use std::sync::atomic::Ordering;

/// A set word on loom's atomics.
struct Word(AtomicU64);

impl set_protocol::SetWord for Word {
    fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }
    fn fetch_and(&self, value: u64, order: Ordering) -> u64 {
        self.0.fetch_and(value, order)
    }
    fn compare_exchange(&self, current: u64, new: u64, success: Ordering, failure: Ordering) -> Result<u64, u64> {
        self.0.compare_exchange(current, new, success, failure)
    }
    fn fence(&self) {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// Participants 1 and 65: bit 1 of the first word and of the second.
const A: Participant = Participant(1);
const B: Participant = Participant(65);

fn set(a: bool, b: bool) -> Arc<[Word; 2]> {
    Arc::new([Word(AtomicU64::new(u64::from(a) << 1)), Word(AtomicU64::new(u64::from(b) << 1))])
}

#[test]
fn two_claims_in_different_words_never_both_succeed() {
    loom::model(|| {
        let s = set(false, false);
        let t = {
            let s = s.clone();
            loom::thread::spawn(move || set_protocol::try_claim(&s[..], B))
        };
        let a = set_protocol::try_claim(&s[..], A);
        let b = t.join().unwrap();
        assert!(!(a && b), "both claimed the set");
    });
}

#[test]
fn two_holders_letting_go_at_once_never_both_see_the_other() {
    loom::model(|| {
        let s = set(true, true);
        let t = {
            let s = s.clone();
            loom::thread::spawn(move || set_protocol::remove(&s[..], B) && set_protocol::is_empty(&s[..]))
        };
        let a = set_protocol::remove(&s[..], A) && set_protocol::is_empty(&s[..]);
        let b = t.join().unwrap();
        assert!(a || b, "neither holder found itself the last");
    });
}
