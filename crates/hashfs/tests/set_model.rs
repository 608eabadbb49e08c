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

/// A set with A and B in it as `a` and `b` say, and `step` run for A here and for B on
/// another thread at once: what each returned.
fn at_once(a: bool, b: bool, step: fn(&[Word], Participant) -> bool) -> (bool, bool) {
    let s = Arc::new([Word(AtomicU64::new(u64::from(a) << 1)), Word(AtomicU64::new(u64::from(b) << 1))]);
    let t = {
        let s = s.clone();
        loom::thread::spawn(move || step(&s[..], B))
    };
    let a = step(&s[..], A);
    (a, t.join().unwrap())
}

#[test]
fn two_claims_in_different_words_never_both_succeed() {
    loom::model(|| {
        let (a, b) = at_once(false, false, set_protocol::try_claim);
        assert!(!(a && b), "both claimed the set");
    });
}

#[test]
fn two_holders_letting_go_at_once_never_both_see_the_other() {
    loom::model(|| {
        let (a, b) = at_once(true, true, |s, p| set_protocol::remove(s, p) && set_protocol::is_empty(s));
        assert!(a || b, "neither holder found itself the last");
    });
}
