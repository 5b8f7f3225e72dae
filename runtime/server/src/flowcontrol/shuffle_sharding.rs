//! Shuffle sharding: a flow's hash deals it a "hand" of distinct queues
//! out of a priority level's "deck", so that two flows rarely share all
//! their queues.

use std::hash::{DefaultHasher, Hash, Hasher};

/// The hash of a flow (its FlowSchema name and distinguisher); stable
/// across processes.
pub fn flow_hash(schema: &str, distinguisher: &str) -> u64 {
    let mut h = DefaultHasher::new();
    schema.hash(&mut h);
    distinguisher.hash(&mut h);
    h.finish()
}

/// Deals `hand` distinct cards from `0..deck`, drawing each from the
/// remaining ones with successive digits of `hash` in a mixed radix
/// (`deck`, `deck - 1`, ...). `hand` is clamped to `deck`.
pub fn deal(mut hash: u64, deck: usize, hand: usize) -> Vec<usize> {
    let hand = hand.min(deck);
    let mut cards: Vec<usize> = Vec::with_capacity(hand);
    for i in 0..hand {
        let remaining = (deck - i) as u64;
        // The digit indexes the cards not dealt yet, in order.
        let mut card = usize::try_from(hash % remaining).unwrap_or_default();
        hash /= remaining;
        let mut dealt = cards.clone();
        dealt.sort_unstable();
        for d in dealt {
            if card >= d {
                card += 1;
            }
        }
        cards.push(card);
    }
    cards
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn hands_are_distinct_in_range_and_deterministic() {
        for seed in 0..2000u64 {
            let hash = flow_hash("schema", &seed.to_string());
            let hand = deal(hash, 64, 8);
            assert_eq!(hand.len(), 8);
            assert!(hand.iter().all(|c| *c < 64));
            assert_eq!(hand.iter().collect::<BTreeSet<_>>().len(), 8, "{hand:?}");
            assert_eq!(deal(hash, 64, 8), hand);
        }
        assert_eq!(deal(7, 3, 5).len(), 3);
        let mut whole = deal(12345, 5, 5);
        whole.sort_unstable();
        assert_eq!(whole, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn digits_pick_among_remaining_cards() {
        // hash 0 deals the lowest cards in order; 1 starts with card 1.
        assert_eq!(deal(0, 10, 3), vec![0, 1, 2]);
        assert_eq!(deal(1, 10, 3), vec![1, 0, 2]);
        // 9 + 10*8 : first digit 9 (card 9), second 8 of the 9 left (card 8).
        assert_eq!(deal(9 + 10 * 8, 10, 2), vec![9, 8]);
    }

    #[test]
    fn cards_are_spread_evenly() {
        let mut counts = [0usize; 16];
        for seed in 0..16000u64 {
            for c in deal(flow_hash("s", &seed.to_string()), 16, 4) {
                counts[c] += 1;
            }
        }
        // 4000 per card expected.
        assert!(
            counts.iter().all(|n| (3400..4600).contains(n)),
            "{counts:?}"
        );
    }

    #[test]
    fn different_flows_rarely_share_a_whole_hand() {
        let hands: Vec<BTreeSet<usize>> = (0..200)
            .map(|i| {
                deal(flow_hash("s", &format!("user-{i}")), 64, 8)
                    .into_iter()
                    .collect()
            })
            .collect();
        let mut identical = 0;
        for i in 0..hands.len() {
            for j in i + 1..hands.len() {
                if hands[i] == hands[j] {
                    identical += 1;
                }
            }
        }
        assert_eq!(identical, 0);
    }
}
