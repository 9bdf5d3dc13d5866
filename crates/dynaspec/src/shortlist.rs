//! The drafter's shortlist at each draft position: DynaSpec's union of routed clusters
//! (`𝒱_S(c, t) = ⨄_{m ∈ TopK_{k_c(t)}(s)} C_m`, §4.2), or the frequency-ranked baselines FR-Spec
//! and PA-FR (App. A.3). Every shortlist keeps the end-of-sequence tokens: a drafter that could
//! never propose EOS would draft past the end of every answer.

use crate::budget::{ClusterBudget, TokenBudget};
use crate::clusters::Clusters;
use crate::error::{Error, Result};
use crate::router::{Router, top_k};

/// Token ids a drafter's head is evaluated on, ascending and distinct, EOS included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortlist {
    ids: Vec<u32>,
}

impl Shortlist {
    /// A shortlist of `ids` over a vocabulary of `vocab` tokens that must keep every token of
    /// `eos`.
    ///
    /// # Errors
    /// When it is empty, an id is `≥ vocab`, or an EOS token is missing ("would drop EOS").
    pub fn new(mut ids: Vec<u32>, vocab: usize, eos: &[u32]) -> Result<Shortlist> {
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Err(Error::invalid("an empty shortlist; the drafter's head needs at least one token"));
        }
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::invalid(format!("shortlist token {bad} is outside the vocabulary of {vocab}")));
        }
        if let Some(&missing) = eos.iter().find(|e| ids.binary_search(e).is_err()) {
            return Err(Error::invalid(format!(
                "the shortlist would drop the end-of-sequence token {missing}, so the drafter could never end an \
                 answer; add it to the shortlist"
            )));
        }
        Ok(Shortlist { ids })
    }

    /// The ids, ascending.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether it is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `token` is in it.
    pub fn contains(&self, token: u32) -> bool {
        self.ids.binary_search(&token).is_ok()
    }
}

fn check_eos(eos: &[u32], vocab: usize) -> Result<Vec<u32>> {
    if let Some(&bad) = eos.iter().find(|&&t| t as usize >= vocab) {
        return Err(Error::invalid(format!(
            "the end-of-sequence token {bad} is outside the vocabulary of {vocab}; check the model's EOS id"
        )));
    }
    Ok(eos.to_vec())
}

/// DynaSpec: the router scores clusters, the top `k_c(t)` are kept, their union (with EOS) is
/// the shortlist. DynaSpec-F with [`ClusterBudget::Fixed`], DynaSpec-PA with
/// [`ClusterBudget::PositionAware`] (Eq. 3).
#[derive(Clone, Debug)]
pub struct DynamicShortlister {
    clusters: Clusters,
    router: Router,
    budget: ClusterBudget,
    eos: Vec<u32>,
}

impl DynamicShortlister {
    /// # Errors
    /// When the router scores another number of clusters than there are, the budget is out of
    /// range for `M` (or `k₀ < k₁`), or an EOS id is outside the vocabulary.
    pub fn new(clusters: Clusters, router: Router, budget: ClusterBudget, eos: &[u32]) -> Result<Self> {
        if router.clusters() != clusters.len() {
            return Err(Error::invalid(format!(
                "the router scores {} clusters but the partition has {}; they come from different builds",
                router.clusters(),
                clusters.len()
            )));
        }
        let budget = budget.validate(clusters.len())?;
        let eos = check_eos(eos, clusters.vocab_size())?;
        Ok(DynamicShortlister { clusters, router, budget, eos })
    }

    /// The clusters.
    pub fn clusters(&self) -> &Clusters {
        &self.clusters
    }

    /// The router.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// The budget.
    pub fn budget(&self) -> ClusterBudget {
        self.budget
    }

    /// The clusters selected at draft position `t`: `𝒦(c, t) = TopK_{k_c(t)}(s)`.
    ///
    /// # Errors
    /// When the inputs' widths disagree with the router.
    pub fn selected(&self, t: usize, embedding: &[f32], prev_hidden: &[f32]) -> Result<Vec<u32>> {
        let scores = self.router.scores(embedding, prev_hidden)?;
        Ok(top_k(&scores, self.budget.clusters_at(t)))
    }

    /// The shortlist at draft position `t` for the current token's embedding `E(x_t)` and the
    /// drafter's previous final hidden state `H̃_{t−1}`.
    ///
    /// # Errors
    /// As [`DynamicShortlister::selected`].
    pub fn shortlist(&self, t: usize, embedding: &[f32], prev_hidden: &[f32]) -> Result<Shortlist> {
        let selected = self.selected(t, embedding, prev_hidden)?;
        Ok(self.union(&selected))
    }

    /// The end-of-sequence ids every shortlist keeps.
    pub fn eos(&self) -> &[u32] {
        &self.eos
    }

    /// The union of clusters `selected`, with EOS.
    pub fn union(&self, selected: &[u32]) -> Shortlist {
        let mut ids: Vec<u32> = selected.iter().flat_map(|&m| self.clusters.members(m as usize)).copied().collect();
        ids.extend_from_slice(&self.eos);
        ids.sort_unstable();
        ids.dedup();
        Shortlist { ids }
    }
}

/// FR-Spec and PA-FR: the `K_fr(t)` most frequent tokens of a corpus ranking, with EOS.
#[derive(Clone, Debug)]
pub struct FrequencyShortlister {
    /// One shortlist per distinct budget, built once: `(tokens, shortlist)`, ascending.
    built: Vec<(usize, Shortlist)>,
    budget: TokenBudget,
    /// The ranking's first `built.last().0` tokens.
    ranked: Vec<u32>,
    eos: Vec<u32>,
}

impl FrequencyShortlister {
    /// `ranking` lists tokens most frequent first (ids `< vocab`, no repeats).
    ///
    /// # Errors
    /// When the ranking repeats or leaves the vocabulary, the budget is out of range, or an EOS
    /// id is outside the vocabulary.
    pub fn new(ranking: &[u32], vocab: usize, budget: TokenBudget, eos: &[u32]) -> Result<Self> {
        let budget = budget.validate(ranking.len())?;
        let eos = check_eos(eos, vocab)?;
        let mut seen = vec![false; vocab];
        for &t in ranking {
            let slot = seen
                .get_mut(t as usize)
                .ok_or_else(|| Error::invalid(format!("ranked token {t} is outside the vocabulary of {vocab}")))?;
            if std::mem::replace(slot, true) {
                return Err(Error::invalid(format!("token {t} appears twice in the frequency ranking")));
            }
        }
        let mut sizes: Vec<usize> = (0..64).map(|t| budget.tokens_at(t)).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let built = sizes
            .into_iter()
            .map(|k| {
                let mut ids = ranking[..k].to_vec();
                ids.extend_from_slice(&eos);
                Shortlist::new(ids, vocab, &eos).map(|s| (k, s))
            })
            .collect::<Result<Vec<_>>>()?;
        let ranked = ranking[..built.last().map_or(0, |(k, _)| *k)].to_vec();
        Ok(FrequencyShortlister { built, budget, ranked, eos })
    }

    /// The ranking cut at the distinct budget sizes: block `b` holds the tokens ranked between
    /// the `b`-th smallest budget and the next, so the shortlist of any position is whole
    /// blocks `0..=b` (see [`FrequencyShortlister::blocks_at`]) plus EOS.
    pub fn blocks(&self) -> Vec<Vec<u32>> {
        let mut start = 0;
        self.built
            .iter()
            .map(|(k, _)| {
                let block = self.ranked[start..*k].to_vec();
                start = *k;
                block
            })
            .collect()
    }

    /// The blocks of [`FrequencyShortlister::blocks`] that make the shortlist at draft position
    /// `t` (with [`FrequencyShortlister::eos`]).
    pub fn blocks_at(&self, t: usize) -> Vec<u32> {
        (0..=self.built_index(t) as u32).collect()
    }

    /// The index in `built` of the budget at draft position `t`.
    fn built_index(&self, t: usize) -> usize {
        let k = self.budget.tokens_at(t.min(63));
        self.built.iter().position(|(size, _)| *size == k).unwrap_or(0)
    }

    /// The end-of-sequence ids every shortlist keeps.
    pub fn eos(&self) -> &[u32] {
        &self.eos
    }

    /// The budget.
    pub fn budget(&self) -> TokenBudget {
        self.budget
    }

    /// The shortlist at draft position `t`.
    pub fn shortlist(&self, t: usize) -> &Shortlist {
        &self.built[self.built_index(t)].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> (Clusters, Router) {
        // 8 tokens in 4 clusters of 2; the router ignores its input and ranks clusters 2, 0, 3, 1.
        let clusters = Clusters::from_assignment(vec![0, 0, 1, 1, 2, 2, 3, 3], 4).unwrap();
        let router = Router::new(2, 1, 4, vec![0.0, 0.0], vec![0.0], vec![0.0; 4], vec![2.0, 0.0, 3.0, 1.0]).unwrap();
        (clusters, router)
    }

    #[test]
    fn dynaspec_keeps_the_routed_clusters_and_eos() {
        let (clusters, router) = toy();
        let s = DynamicShortlister::new(clusters, router, ClusterBudget::PositionAware { k0: 2, k1: 1 }, &[7]).unwrap();
        assert_eq!(s.shortlist(0, &[1.0], &[1.0]).unwrap().ids(), &[0, 1, 4, 5, 7]);
        assert_eq!(s.shortlist(1, &[1.0], &[1.0]).unwrap().ids(), &[4, 5, 7]);
        // Eq. 3 at t = 2 with k₁ = 1: ⌊3/4⌋ = 0, floored to one cluster.
        assert_eq!(s.shortlist(2, &[1.0], &[1.0]).unwrap().ids(), &[4, 5, 7]);
    }

    #[test]
    fn a_router_for_another_partition_or_bad_budgets_or_eos_are_refused() {
        let (clusters, router) = toy();
        let three = Clusters::from_assignment(vec![0, 0, 1, 1, 2, 2, 2, 2], 3).unwrap();
        assert!(DynamicShortlister::new(three, router.clone(), ClusterBudget::Fixed { k: 1 }, &[7]).is_err());
        let e = DynamicShortlister::new(
            clusters.clone(),
            router.clone(),
            ClusterBudget::PositionAware { k0: 1, k1: 2 },
            &[7],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("smaller than k1"), "{e}");
        assert!(
            DynamicShortlister::new(clusters.clone(), router.clone(), ClusterBudget::Fixed { k: 5 }, &[7]).is_err()
        );
        let e = DynamicShortlister::new(clusters, router, ClusterBudget::Fixed { k: 1 }, &[8]).unwrap_err().to_string();
        assert!(e.contains("end-of-sequence token 8"), "{e}");
    }

    #[test]
    fn a_shortlist_without_eos_is_refused() {
        let e = Shortlist::new(vec![1, 2, 3], 10, &[9]).unwrap_err().to_string();
        assert!(e.contains("drop the end-of-sequence token 9"), "{e}");
        assert_eq!(Shortlist::new(vec![3, 1, 9, 1], 10, &[9]).unwrap().ids(), &[1, 3, 9]);
        assert!(Shortlist::new(vec![10], 10, &[]).is_err());
        assert!(Shortlist::new(vec![], 10, &[]).is_err());
    }

    #[test]
    fn frequency_ranked_and_position_aware() {
        let ranking = [5u32, 3, 8, 0, 1, 2];
        let fr = FrequencyShortlister::new(&ranking, 10, TokenBudget::Fixed { k: 3 }, &[9]).unwrap();
        assert_eq!(fr.shortlist(0).ids(), &[3, 5, 8, 9]);
        assert_eq!(fr.shortlist(40).ids(), &[3, 5, 8, 9]);
        let pa = FrequencyShortlister::new(&ranking, 10, TokenBudget::PositionAware { k_max: 6 }, &[9]).unwrap();
        assert_eq!(pa.shortlist(1).len(), 7);
        assert_eq!(pa.shortlist(2).ids(), &[3, 5, 9]); // ⌊6/3⌋ = 2 tokens, then EOS
        assert_eq!(pa.shortlist(100).ids(), &[5, 9]);
        // The same shortlists as whole blocks of the ranking: blocks 0..=b of the position's.
        let blocks = pa.blocks();
        for t in 0..8 {
            let mut ids: Vec<u32> = pa.blocks_at(t).iter().flat_map(|&b| blocks[b as usize].clone()).collect();
            ids.extend_from_slice(pa.eos());
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids, pa.shortlist(t).ids(), "t = {t}");
        }
        assert!(FrequencyShortlister::new(&[1, 1], 10, TokenBudget::Fixed { k: 1 }, &[]).is_err());
        assert!(FrequencyShortlister::new(&ranking, 10, TokenBudget::Fixed { k: 7 }, &[]).is_err());
    }
}
