//! Built-in block device profiles for `[[device]] profile = "..."`: the
//! scenario layer's view of [`crate::model::block::DeviceProfile`], whose
//! constructors carry each value's source. One set of profiles for the whole
//! program; a `[[device]]` starts from one and may override single values.

pub use crate::model::block::DeviceProfile;

/// Names of the built-in profiles, in documentation order.
pub const PROFILE_NAMES: &[&str] = DeviceProfile::BUILTIN_NAMES;

/// The built-in profile `name`.
pub fn builtin_profile(name: &str) -> Option<DeviceProfile> {
    DeviceProfile::builtin(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_profile_exists_and_is_sane() {
        for n in PROFILE_NAMES {
            let p = builtin_profile(n);
            assert!(
                p.as_ref().is_some_and(|p| p.write_bw_bytes_per_sec > 0
                    && p.read_bw_bytes_per_sec > 0
                    && p.queue_depth >= 1),
                "{n}"
            );
        }
        assert_eq!(builtin_profile("sata"), None);
    }
}
