//! Unit tests of the rate limiter: parsing, resolution against a table, the
//! in-process store, fail open.

use super::*;
use gateway_base::spec::QuotaSpec;
use governor::clock::FakeRelativeClock;

/// A small route table: the capabilities these tests use, with defaults.
const CAPS: &[Capability] = &[
    Capability {
        name: "tts",
        quota: Some(QuotaSpec {
            count: 60,
            per_secs: 60,
        }),
    },
    Capability {
        name: "voices",
        quota: Some(QuotaSpec {
            count: 10,
            per_secs: 60,
        }),
    },
    Capability {
        name: "stt",
        quota: Some(QuotaSpec {
            count: 30,
            per_secs: 60,
        }),
    },
    Capability {
        name: "detect",
        quota: Some(QuotaSpec {
            count: 30,
            per_secs: 60,
        }),
    },
    Capability {
        name: "webhook",
        quota: None,
    },
    Capability {
        name: "chat",
        quota: Some(QuotaSpec {
            count: 120,
            per_secs: 60,
        }),
    },
    Capability {
        name: "models",
        quota: Some(QuotaSpec {
            count: 300,
            per_secs: 60,
        }),
    },
];

/// `spec` parsed and resolved against [`CAPS`].
fn quotas(spec: Option<&str>) -> Result<Quotas, String> {
    Limits::parse(spec).and_then(|limits| Quotas::resolve(CAPS, &limits))
}

/// The defaults of [`CAPS`].
fn defaults() -> Quotas {
    Quotas::resolve(CAPS, &Limits::default()).unwrap()
}

/// A check of the in-process store (or of a store answering at once): it
/// never suspends, so one poll decides it.
#[track_caller]
fn now<T>(check: impl std::future::Future<Output = T>) -> T {
    futures_util::FutureExt::now_or_never(check).expect("decided without suspending")
}

fn fake() -> (FakeRelativeClock, Arc<InProcessStore<FakeRelativeClock>>) {
    let clock = FakeRelativeClock::default();
    (clock.clone(), Arc::new(InProcessStore::with_clock(clock)))
}

fn limiter(
    spec: &str,
) -> (
    FakeRelativeClock,
    Arc<InProcessStore<FakeRelativeClock>>,
    RateLimiter,
) {
    let (clock, store) = fake();
    let rl = RateLimiter::new(CAPS, &Limits::parse(Some(spec)).unwrap(), store.clone()).unwrap();
    (clock, store, rl)
}

// ---- parsing ----

#[test]
fn parse_good_specs() {
    assert_eq!(quotas(None).unwrap(), defaults());
    assert_eq!(quotas(Some("")).unwrap(), defaults());
    assert_eq!(quotas(Some("  ")).unwrap(), defaults());
    assert!(Limits::parse(None).unwrap().is_empty());
    assert_eq!(Limits::parse(Some(" ,")).unwrap(), Limits::default());

    let l = quotas(Some("tts=60/m,stt=30/m,detect=600/h")).unwrap();
    assert_eq!(l.get("tts"), Some(&Quota::per_minute(60)));
    assert_eq!(l.get("stt"), Some(&Quota::per_minute(30)));
    assert_eq!(l.get("detect"), Some(&Quota::per_hour(600)));
    // Untouched capabilities keep their defaults.
    assert_eq!(l.get("models"), Some(&Quota::per_minute(300)));

    let l = quotas(Some(
        " tts = 5 / s ,\tvoices=2/d , chat= off, webhook=100/h ,",
    ))
    .unwrap();
    assert_eq!(
        l.get("tts"),
        Some(&Quota {
            count: 5,
            per: Duration::from_secs(1)
        })
    );
    assert_eq!(
        l.get("voices"),
        Some(&Quota {
            count: 2,
            per: Duration::from_secs(86_400)
        })
    );
    assert_eq!(l.get("chat"), None);
    assert_eq!(l.get("webhook"), Some(&Quota::per_hour(100)));
    assert_eq!(quotas(Some("tts=OFF")).unwrap().get("tts"), None);
}

#[test]
fn parse_errors_name_the_culprit() {
    let err = |s: &str| quotas(Some(s)).unwrap_err();
    let e = err("tts=60/m,speech=10/m");
    assert!(e.contains("unknown capability \"speech\""), "{e}");
    assert!(
        e.contains("tts") && e.contains("models"),
        "lists the known names: {e}"
    );
    assert!(err("=10/m").contains("unknown capability \"\""));
    assert!(err("TTS=10/m").contains("unknown capability \"TTS\""));
    let e = err("tts=0/m");
    assert!(e.starts_with("tts: ") && e.contains("0"), "{e}");
    let e = err("stt=10/w");
    assert!(
        e.starts_with("stt: ") && e.contains("unknown unit \"w\""),
        "{e}"
    );
    let e = err("stt=ten/m");
    assert!(e.starts_with("stt: ") && e.contains("\"ten\""), "{e}");
    assert!(err("stt=-1/m").contains("\"-1\""));
    assert!(err("stt=1.5/m").contains("\"1.5\""));
    assert!(err("stt=99999999999/m").contains("not a whole number"));
    let e = err("stt=10");
    assert!(e.starts_with("stt: ") && e.contains("count/unit"), "{e}");
    assert!(err("stt=").starts_with("stt: "));
    assert!(err("stt 10/m").contains("\"stt 10/m\""));
    let e = err("tts=1/s, tts=2/s");
    assert!(e.contains("\"tts\"") && e.contains("more than once"), "{e}");
    // Names are checked against the table, not by the parser.
    let speech = Limits::parse(Some("speech=10/m")).unwrap();
    assert_eq!(
        speech.iter().collect::<Vec<_>>(),
        [("speech", Some(&Quota::per_minute(10)))]
    );
    let e = RateLimiter::in_process(CAPS, &speech).unwrap_err();
    assert!(e.contains("unknown capability \"speech\""), "{e}");
}

#[test]
fn quota_display_round_trips() {
    for s in ["60/s", "60/m", "600/h", "1/d"] {
        assert_eq!(s.parse::<Quota>().unwrap().to_string(), s);
    }
    let l = quotas(Some("tts=1/s")).unwrap();
    let shown = l.to_string();
    assert!(
        shown.starts_with("tts=1/s,voices=10/m,") && shown.contains("webhook=off"),
        "{shown}"
    );
    assert_eq!(quotas(Some(&shown)).unwrap(), l);
    // The operator's limits show as given.
    let given = Limits::parse(Some(" tts = 1/s , webhook=off,")).unwrap();
    assert_eq!(given.to_string(), "tts=1/s,webhook=off");
    assert_eq!(Limits::parse(Some(&given.to_string())).unwrap(), given);
    assert_eq!(Limits::default().to_string(), "");
}

// ---- defaults ----

#[test]
fn table_defaults_cover_every_capability() {
    let d = defaults();
    assert_eq!(
        d.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        CAPS.iter().map(|c| c.name).collect::<Vec<_>>(),
        "every capability of the table, in table order"
    );
    for cap in CAPS {
        assert_eq!(
            d.get(cap.name).copied(),
            cap.quota.map(Quota::from_spec),
            "{}",
            cap.name
        );
    }
    assert_eq!(d.get("webhook"), None, "off in the table: not limited");
    assert_eq!(d.get("tts"), Some(&Quota::per_minute(60)));
    assert_eq!(d.get("stt"), Some(&Quota::per_minute(30)));
    assert_eq!(d.get("nope"), None);
    assert_eq!(
        RateLimiter::in_process(CAPS, &Limits::default())
            .unwrap()
            .quotas(),
        &d
    );
}

#[test]
fn table_quotas_read_like_the_table() {
    let shown = |count, per_secs| Quota::from(QuotaSpec { count, per_secs }).to_string();
    assert_eq!(shown(60, 60), "60/m");
    assert_eq!(shown(5, 1), "5/s");
    assert_eq!(shown(600, 3600), "600/h");
    assert_eq!(shown(1, 86_400), "1/d");
    assert_eq!(shown(5, 90), "5/90s");
    assert_eq!(
        Quota::from_spec(QuotaSpec {
            count: 60,
            per_secs: 60
        }),
        Quota::per_minute(60)
    );
}

#[test]
fn the_61st_request_of_60_per_minute_is_denied() {
    let (clock, _, rl) = limiter("tts=60/m");
    for i in 0..60 {
        assert_eq!(now(rl.check(7, "tts")), Ok(()), "request {}", i + 1);
    }
    let retry = now(rl.check(7, "tts")).unwrap_err();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(retry, 1, "GCRA: one request comes back every second");
    // Still denied a moment later, allowed once the time has passed.
    clock.advance(Duration::from_millis(500));
    assert_eq!(now(rl.check(7, "tts")), Err(1));
    clock.advance(Duration::from_millis(500));
    assert_eq!(now(rl.check(7, "tts")), Ok(()));
    assert_eq!(now(rl.check(7, "tts")), Err(1));
    // A full period later the whole burst is back.
    clock.advance(Duration::from_secs(60));
    for _ in 0..60 {
        assert_eq!(now(rl.check(7, "tts")), Ok(()));
    }
    assert!(now(rl.check(7, "tts")).is_err());
}

#[test]
fn other_users_and_capabilities_are_unaffected() {
    let (_, _, rl) = limiter("tts=60/m,stt=2/m");
    for _ in 0..60 {
        now(rl.check(1, "tts")).unwrap();
    }
    assert!(now(rl.check(1, "tts")).is_err());
    for _ in 0..60 {
        assert_eq!(now(rl.check(2, "tts")), Ok(()), "another user");
    }
    assert_eq!(now(rl.check(1, "stt")), Ok(()), "another capability");
    assert_eq!(now(rl.check(1, "stt")), Ok(()));
    assert_eq!(now(rl.check(1, "stt")), Err(30), "2/m: one every 30 s");
    assert_eq!(now(rl.check(-1, "stt")), Ok(()));
    // Unlimited and unknown capabilities never reach the store.
    for _ in 0..1000 {
        assert_eq!(now(rl.check(1, "webhook")), Ok(()));
        assert_eq!(now(rl.check(1, "no_such_capability")), Ok(()));
    }
}

#[test]
fn retry_after_is_whole_seconds_rounded_up_at_least_one() {
    assert_eq!(retry_after_secs(Duration::ZERO), 1);
    assert_eq!(retry_after_secs(Duration::from_nanos(1)), 1);
    assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
    assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
    assert_eq!(retry_after_secs(Duration::from_millis(59_500)), 60);
    assert_eq!(retry_after_secs(Duration::from_secs(3600)), 3600);

    // Through the store: 1/h leaves 3600 s to wait, then less but never 0.
    let (clock, _, rl) = limiter("tts=1/h");
    now(rl.check(1, "tts")).unwrap();
    assert_eq!(now(rl.check(1, "tts")), Err(3600));
    clock.advance(Duration::from_millis(1500));
    assert_eq!(now(rl.check(1, "tts")), Err(3599), "3598.5 s rounds up");
    clock.advance(Duration::from_millis(3_598_499));
    assert_eq!(now(rl.check(1, "tts")), Err(1), "1 ms left is 1 s");
}

#[test]
fn a_changed_quota_starts_afresh() {
    let (_, store) = fake();
    assert_eq!(
        store.decide(1, "tts", &Quota::per_minute(1)),
        Decision::Allow
    );
    assert!(matches!(
        store.decide(1, "tts", &Quota::per_minute(1)),
        Decision::Deny { .. }
    ));
    assert_eq!(
        store.decide(1, "tts", &Quota::per_minute(2)),
        Decision::Allow
    );
    // Degenerate hand-built quotas.
    let zero = Quota {
        count: 0,
        per: Duration::from_secs(60),
    };
    assert_eq!(
        store.decide(1, "x", &zero),
        Decision::Deny {
            retry_after: Duration::from_secs(60)
        }
    );
    let instant = Quota {
        count: 5,
        per: Duration::ZERO,
    };
    for _ in 0..100 {
        assert_eq!(store.decide(1, "y", &instant), Decision::Allow);
    }
}

#[test]
fn stale_states_are_swept() {
    let (clock, store, rl) = limiter("tts=60/m,stt=30/m");
    for user in 0..1000 {
        now(rl.check(user, "tts")).unwrap();
        now(rl.check(user, "stt")).unwrap();
    }
    // One user uses its whole burst: its state stays relevant for a minute.
    for _ in 0..60 {
        now(rl.check(5000, "tts")).unwrap();
    }
    assert_eq!(store.tracked_keys(), 2001);
    clock.advance(Duration::from_secs(10));
    store.sweep();
    assert_eq!(
        store.tracked_keys(),
        1,
        "only the busy user is still remembered"
    );
    // 10 s later, the busy user has 10 requests back, not a fresh burst.
    for _ in 0..10 {
        now(rl.check(5000, "tts")).unwrap();
    }
    assert!(
        now(rl.check(5000, "tts")).is_err(),
        "sweeping forgot nothing that matters"
    );
    // The sweep also runs by itself once SWEEP_EVERY has passed.
    for user in 0..100 {
        now(rl.check(user, "tts")).unwrap();
    }
    clock.advance(SWEEP_EVERY + Duration::from_secs(20));
    now(rl.check(9999, "stt")).unwrap();
    assert_eq!(
        store.tracked_keys(),
        1,
        "the sweep ran before the request was counted"
    );
}

#[test]
fn in_process_on_the_real_clock() {
    // 60/h: no request comes back within the test, whatever the machine's speed.
    let rl = RateLimiter::in_process(CAPS, &Limits::parse(Some("tts=60/h")).unwrap()).unwrap();
    for _ in 0..60 {
        assert_eq!(now(rl.check(1, "tts")), Ok(()));
    }
    let retry = now(rl.check(1, "tts")).unwrap_err();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(now(rl.check(2, "tts")), Ok(()));
    assert_eq!(now(rl.check(1, "stt")), Ok(()));
    match now(rl.enforce(1, "tts")).unwrap_err() {
        ApiError::RateLimited {
            message,
            retry_after,
        } => {
            assert!((1..=60).contains(&retry_after));
            assert!(message.contains("tts"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn concurrent_checks_never_exceed_the_burst() {
    let (_, _, rl) = limiter("tts=100/h");
    let rl = Arc::new(rl);
    let allowed = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (rl, allowed) = (rl.clone(), allowed.clone());
            std::thread::spawn(move || {
                for _ in 0..50 {
                    if now(rl.check(1, "tts")).is_ok() {
                        allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(allowed.load(Ordering::Relaxed), 100);
}

// ---- fail open ----

struct FailingStore {
    calls: AtomicU64,
}

impl LimiterStore for FailingStore {
    fn check<'a>(&'a self, _: i64, _: &'a str, _: &'a Quota) -> CheckFuture<'a> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Err(StoreUnavailable("connection refused".to_owned())) })
    }
}

#[test]
fn a_failing_store_allows_every_request_and_warns_rarely() {
    let store = Arc::new(FailingStore {
        calls: AtomicU64::new(0),
    });
    let started = Instant::now();
    let rl = RateLimiter::new(
        CAPS,
        &Limits::parse(Some("tts=1/d")).unwrap(),
        store.clone(),
    )
    .unwrap();
    for _ in 0..1000 {
        assert_eq!(now(rl.check(1, "tts")), Ok(()), "fail open");
    }
    assert_eq!(now(rl.enforce(1, "tts")), Ok(()));
    assert_eq!(
        store.calls.load(Ordering::Relaxed),
        1001,
        "the store was asked every time"
    );
    assert_eq!(rl.store_failures(), 1001);
    let warnings = rl.warnings.load(Ordering::Relaxed);
    let bound = 1 + started.elapsed().as_secs() / WARN_EVERY.as_secs();
    assert!(
        warnings >= 1 && warnings <= bound,
        "the warning was logged, not once per request: {warnings}"
    );
    assert_eq!(warnings + rl.suppressed.load(Ordering::Relaxed), 1001);
    // Not limited capabilities do not ask the store.
    now(rl.check(1, "webhook")).unwrap();
    assert_eq!(store.calls.load(Ordering::Relaxed), 1001);
}

#[test]
fn store_decisions_map_to_whole_seconds() {
    struct Fixed(Decision);
    impl LimiterStore for Fixed {
        fn check<'a>(&'a self, _: i64, _: &'a str, _: &'a Quota) -> CheckFuture<'a> {
            Box::pin(std::future::ready(Ok(self.0)))
        }
    }
    let check = |d: Decision| {
        let rl = RateLimiter::new(CAPS, &Limits::default(), Arc::new(Fixed(d))).unwrap();
        now(rl.check(1, "tts"))
    };
    assert_eq!(check(Decision::Allow), Ok(()));
    assert_eq!(
        check(Decision::Deny {
            retry_after: Duration::ZERO
        }),
        Err(1)
    );
    assert_eq!(
        check(Decision::Deny {
            retry_after: Duration::from_millis(1500)
        }),
        Err(2)
    );
    assert_eq!(
        check(Decision::Deny {
            retry_after: Duration::from_secs(30)
        }),
        Err(30)
    );
}
