//! The catalog of scenario keys: every key each key table reads, for
//! `wbsim check --keys` and the documentation tests. It sits above the
//! tables ([`super::machine`], [`super::device`], [`super::policy`]) so
//! that [`super::keys`], which they all build on, imports none of them.

use super::keys::KeyDoc;

/// Every key read by a key table: `[machine]`, `[sysctl]`, `[[device]]`,
/// `[device.bdi]` and the policy keys of `[variants.NAME]`.
pub fn key_docs() -> Vec<KeyDoc> {
    let mut out: Vec<KeyDoc> = super::machine::MACHINE.docs().collect();
    out.extend(super::machine::SYSCTL.docs());
    out.extend(super::device::DEVICE.docs());
    out.extend(super::device::BDI.docs());
    out.extend(super::policy::POLICIES.docs());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_documented_once() {
        let docs = key_docs();
        for d in &docs {
            assert!(!d.doc.is_empty() && !d.unit.is_empty(), "{d:?}");
            let same = docs
                .iter()
                .filter(|e| e.section == d.section && e.key == d.key)
                .count();
            assert_eq!(same, 1, "{d:?}");
        }
        assert!(docs
            .iter()
            .any(|d| d.section == "[sysctl]" && d.key == "dirty_ratio"));
    }
}
