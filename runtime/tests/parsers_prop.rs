//! Property tests of parsers that read caller or provider input: the webhook
//! signature header and the query string. They must never panic, and must
//! accept exactly what they should.

use proptest::prelude::*;
use runtime::{signing, validate};

proptest! {
    #[test]
    fn signature_parsing_never_panics(secret in any::<Vec<u8>>(), body in any::<Vec<u8>>(), header in any::<Option<String>>()) {
        let _ = signing::verify(&secret, &body, header.as_deref());
    }

    #[test]
    fn a_signature_verifies_its_body_and_no_other(secret in proptest::collection::vec(any::<u8>(), 1..64), body in any::<Vec<u8>>(), extra in any::<u8>()) {
        let header = signing::sign(&secret, &body);
        prop_assert!(signing::verify(&secret, &body, Some(&header)).is_ok());
        let mut other = body.clone();
        other.push(extra);
        prop_assert!(signing::verify(&secret, &other, Some(&header)).is_err());
    }

    #[test]
    fn query_parsing_never_panics(q in any::<Option<String>>()) {
        let _ = validate::parse_query(q.as_deref());
    }

    #[test]
    fn plain_query_pairs_are_read_back(pairs in proptest::collection::vec(("[a-z_]{1,8}", "[a-zA-Z0-9]{0,8}"), 0..6)) {
        let q: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let q = q.join("&");
        let parsed = validate::parse_query(Some(&q));
        prop_assert_eq!(parsed, pairs);
    }
}
