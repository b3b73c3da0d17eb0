//! Configuration: environment → [`Config`].
//!
//! Precedence: a value set in the environment wins over the default listed
//! beside its name below. Names of the spec's configuration reference keep
//! their spec names (`PROVIDER_*`); the gateway's own start with `GATEWAY_`.
//! A value that does not parse is a [`ConfigError`] naming the variable, not
//! a silent default.
//!
//! Every variable the workspace reads, with its default and meaning, is a
//! row of [`variables::VARIABLES`], from which `docs/configuration.md` is
//! generated.

mod error;
mod names;
mod parse;
mod read;
mod settings;
pub mod variables;

pub use error::ConfigError;
pub use names::*;
pub use settings::Config;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::time::Duration;

    fn cfg(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_follow_the_spec() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.prices.markup_pct, rust_decimal::Decimal::from(20));
        assert!(!c.business_plan_active);
        assert_eq!(c.upstream_timeout, Duration::from_secs(120));
        assert_eq!(c.provider_base_url, DEFAULT_BASE_URL);
        assert!(c.provider_api_key.is_none());
        assert_eq!(c.db_path, PathBuf::from("./data/gateway.db"));
        assert_eq!(c.header_timeout, Duration::from_secs(10));
        assert_eq!(c.idle_timeout, Duration::from_secs(75));
        assert!((16..=10_000).contains(&c.max_connections));
    }

    #[test]
    fn connection_limits_parse() {
        let c = cfg(&[
            (GATEWAY_HEADER_TIMEOUT_SECS, "3"),
            (GATEWAY_IDLE_TIMEOUT_SECS, "30"),
            (GATEWAY_MAX_CONNECTIONS, "20"),
        ])
        .unwrap();
        assert_eq!(c.header_timeout, Duration::from_secs(3));
        assert_eq!(c.idle_timeout, Duration::from_secs(30));
        assert_eq!(c.max_connections, 20);
        for name in [
            GATEWAY_HEADER_TIMEOUT_SECS,
            GATEWAY_IDLE_TIMEOUT_SECS,
            GATEWAY_MAX_CONNECTIONS,
        ] {
            assert_eq!(cfg(&[(name, "0")]).err().unwrap().name, name);
            assert_eq!(cfg(&[(name, "soon")]).err().unwrap().name, name);
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        let e = cfg(&[(PROVIDER_BUSINESS_PLAN_ACTIVE, "maybe")])
            .err()
            .unwrap();
        assert_eq!(e.name, PROVIDER_BUSINESS_PLAN_ACTIVE);
        let e = cfg(&[(PROVIDER_BASE_URL, "ftp://x")]).err().unwrap();
        assert_eq!(e.name, PROVIDER_BASE_URL);
        let e = cfg(&[(PROVIDER_MARKUP_PCT, "-3")]).err().unwrap();
        assert_eq!(e.name, PROVIDER_MARKUP_PCT);
    }

    #[test]
    fn every_bad_variable_is_reported_by_its_own_name() {
        let e = cfg(&[
            (PROVIDER_BASE_URL, "ftp://x"),
            (GATEWAY_DB_SYNC, "sometimes"),
            (
                gateway_adapters::objects::config::GATEWAY_OBJECT_STORE,
                "s3",
            ),
            (gateway_adapters::objects::config::GATEWAY_S3_BUCKET, "b"),
            (
                gateway_adapters::objects::config::GATEWAY_S3_ACCESS_KEY,
                "ak",
            ),
            (
                gateway_adapters::objects::config::GATEWAY_S3_SECRET_KEY,
                "sk",
            ),
            (
                gateway_adapters::objects::config::GATEWAY_S3_PATH_STYLE,
                "maybe",
            ),
            (
                gateway_adapters::objects::config::GATEWAY_S3_TIMEOUT_SECS,
                "0",
            ),
        ])
        .err()
        .unwrap();
        assert_eq!(
            e.names(),
            [
                PROVIDER_BASE_URL,
                GATEWAY_DB_SYNC,
                gateway_adapters::objects::config::GATEWAY_S3_PATH_STYLE,
                gateway_adapters::objects::config::GATEWAY_S3_TIMEOUT_SECS
            ]
        );
        let text = e.to_string();
        for name in [
            "PROVIDER_BASE_URL",
            "GATEWAY_DB_SYNC",
            "GATEWAY_S3_PATH_STYLE",
            "GATEWAY_S3_TIMEOUT_SECS",
        ] {
            assert!(text.contains(name), "{text}");
        }
        assert!(!text.contains("GATEWAY_OBJECT_STORE"), "{text}");
    }

    #[test]
    fn a_bad_sign_in_providers_file_is_reported_beside_the_other_variables() {
        let path = std::env::temp_dir().join(format!("gw-oauth-{}.toml", std::process::id()));
        std::fs::write(
            &path,
            "[[provider]]\nid = \"idp\"\nissuer = \"https://idp.example.com\"\nclient_id = \"c\"\nclient_secret_env = \"GW_TEST_UNSET_SECRET\"\n",
        )
        .unwrap();
        let file = path.to_str().unwrap();
        let e = cfg(&[
            (GATEWAY_DB_SYNC, "sometimes"),
            (GATEWAY_OAUTH_PROVIDERS, file),
        ])
        .err()
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(e.names(), [GATEWAY_DB_SYNC, GATEWAY_OAUTH_PROVIDERS]);
        let text = e.to_string();
        assert!(
            text.contains(&format!("{file}: provider \"idp\": client_secret_env")),
            "{text}"
        );
    }

    #[test]
    fn the_job_follower_is_on_every_two_seconds_unless_zero() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.job_follow_interval, Some(Duration::from_secs(2)));
        assert_eq!(c.job_follow_concurrency, 8);
        let c = cfg(&[(GATEWAY_JOB_FOLLOW_SECS, "0")]).unwrap();
        assert_eq!(c.job_follow_interval, None);
        let c = cfg(&[
            (GATEWAY_JOB_FOLLOW_SECS, "5"),
            (GATEWAY_JOB_FOLLOW_CONCURRENCY, "3"),
        ])
        .unwrap();
        assert_eq!(c.job_follow_interval, Some(Duration::from_secs(5)));
        assert_eq!(c.job_follow_concurrency, 3);
        let e = cfg(&[(GATEWAY_JOB_FOLLOW_CONCURRENCY, "0")]).err().unwrap();
        assert_eq!(e.name, GATEWAY_JOB_FOLLOW_CONCURRENCY);
        let e = cfg(&[(GATEWAY_JOB_FOLLOW_SECS, "soon")]).err().unwrap();
        assert_eq!(e.name, GATEWAY_JOB_FOLLOW_SECS);
    }

    #[test]
    fn redis_is_off_unless_configured() {
        assert!(cfg(&[(GATEWAY_REDIS_PREFIX, "x:")])
            .unwrap()
            .redis
            .is_none());
        let c = cfg(&[(GATEWAY_REDIS_URL, "redis://:pw@127.0.0.1:6379/2")]).unwrap();
        let r = c.redis.as_ref().unwrap();
        assert_eq!(r.prefix, gateway_adapters::cluster::DEFAULT_PREFIX);
        assert!(!format!("{c:?}").contains("pw@"), "{c:?}");
        let c = cfg(&[
            (GATEWAY_REDIS_URL, "redis://127.0.0.1"),
            (GATEWAY_REDIS_PREFIX, "gw-eu:"),
        ])
        .unwrap();
        assert_eq!(c.redis.unwrap().prefix, "gw-eu:");
        for bad in ["http://127.0.0.1:6379", "redis://", "not a url"] {
            let e = cfg(&[(GATEWAY_REDIS_URL, bad)]).err().unwrap();
            assert_eq!(e.name, GATEWAY_REDIS_URL, "{bad}");
        }
    }

    #[test]
    fn tls_settings_that_cannot_be_used_name_their_variable() {
        let c = cfg(&[(GATEWAY_REDIS_URL, "rediss://:pw@cache.example:6380")]).unwrap();
        assert!(c.redis.as_ref().unwrap().is_tls());
        let not_pem = std::env::temp_dir().join(format!("gw-not-pem-{}", std::process::id()));
        std::fs::write(&not_pem, "hello").unwrap();
        let not_pem = not_pem.to_str().unwrap();
        for (url, ca, why) in [
            (
                "rediss://h",
                "/no/such/ca.pem",
                "cannot read /no/such/ca.pem",
            ),
            ("rediss://h", not_pem, "no certificate"),
            ("redis://h", not_pem, "not rediss://"),
            ("", not_pem, "without GATEWAY_REDIS_URL"),
        ] {
            let e = cfg(&[(GATEWAY_REDIS_URL, url), (GATEWAY_REDIS_CA_FILE, ca)])
                .err()
                .unwrap();
            assert_eq!(e.name, GATEWAY_REDIS_CA_FILE, "{url} {ca}");
            assert!(e.reason.contains(why), "{url} {ca}: {}", e.reason);
        }
        for (url, why) in [
            (
                "postgres://u:secret@h/d?sslmode=verify-full",
                "needs sslrootcert",
            ),
            ("postgres://u:secret@h/d?sslmode=maybe", "expected disable"),
            (
                "postgres://u:secret@h/d?sslmode=verify-ca&sslrootcert=/no/ca.pem",
                "cannot read",
            ),
            (
                &format!("postgres://u:secret@h/d?sslmode=require&sslrootcert={not_pem}"),
                "no certificate",
            ),
        ] {
            let e = cfg(&[(GATEWAY_DATABASE_URL, url)]).err().unwrap();
            assert_eq!(e.name, GATEWAY_DATABASE_URL, "{url}");
            assert!(e.reason.contains(why), "{url}: {}", e.reason);
            assert!(!e.to_string().contains("secret"), "{e}");
        }
        let _ = std::fs::remove_file(not_pem);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = cfg(&[(PROVIDER_API_KEY, "sk-very-secret")]).unwrap();
        assert!(!format!("{c:?}").contains("very-secret"));
    }

    #[test]
    fn objects_the_provider_cannot_reach_are_warned_about() {
        let mut c = Config::with_data_dir("/tmp/x");
        c.provider_base_url = "https://api.example.com/v2".into();
        c.provider_synth_url = "https://f.example.com".into();
        let w = c
            .unreachable_objects_warning("http://127.0.0.1:8080")
            .unwrap();
        assert!(
            w.contains("GATEWAY_PUBLIC_URL") && w.contains("https://api.example.com/v2"),
            "{w}"
        );
        assert!(c
            .unreachable_objects_warning("http://localhost:8080")
            .is_some());
        assert!(c.unreachable_objects_warning("http://[::1]:8080").is_some());
        assert!(c.unreachable_objects_warning("http://10.1.2.3").is_some());
        assert!(c
            .unreachable_objects_warning("https://gw.example.com")
            .is_none());
        c.provider_base_url = "http://127.0.0.1:9000".into();
        c.provider_synth_url = "http://127.0.0.1:9001".into();
        assert!(
            c.unreachable_objects_warning("http://127.0.0.1:8080")
                .is_none(),
            "both local: fine"
        );
    }
}
