//! Build facts reported by `tesseradb._core.build_info()`.

/// What this build of the kernels is and where it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInfo {
    pub version: &'static str,
    pub profile: &'static str,
    pub target_arch: &'static str,
    pub target_os: &'static str,
    /// Threads in rayon's global pool, which every parallel kernel shares.
    pub threads: usize,
}

impl BuildInfo {
    pub fn current() -> Self {
        BuildInfo {
            version: env!("CARGO_PKG_VERSION"),
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
            target_arch: std::env::consts::ARCH,
            target_os: std::env::consts::OS,
            threads: crate::pool::threads(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_version_and_threads() {
        let facts = BuildInfo::current();
        assert_eq!(facts.version, env!("CARGO_PKG_VERSION"));
        assert!(facts.threads >= 1);
        assert!(!facts.target_os.is_empty());
    }
}
