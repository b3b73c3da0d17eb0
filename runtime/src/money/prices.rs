//! Prices: what a model call may cost (its bound, held) and what it did
//! cost (tokens, images, seconds), markup included, 8 places.

use rust_decimal::Decimal;

use gateway_base::billing::with_markup;
use gateway_base::errors::ApiError;
use gateway_models::providers::{Model, Provider, Tokens};
use gateway_models::realtime::{RealtimeUsage, ResponseBound};

const MTOK: Decimal = Decimal::from_parts(1_000_000, 0, 0, false, 0);

/// The charge of `input` + `output` tokens of `m`, markup included, 8 places.
pub fn token_cost(p: &Provider, m: &Model, input: u64, output: u64) -> Decimal {
    with_markup(raw_token_cost(m, Tokens::new(input, output)), p.markup_pct)
}

/// The most a request's [`gateway_models::bounds::Bound`] can cost on `m` of `p`
/// (its tokens and its images), markup included: what is held. Its input
/// is priced at the highest of the input and cache prices, so that the hold
/// stays an upper bound however the provider splits the prompt between
/// input, cache reads and cache writes.
/// `Err`: 500 "pricing calculation failed" (spec §7), when a price is so
/// large that the cost overflows a decimal; nothing is held or sent then.
pub fn bound_cost(
    p: &Provider,
    m: &Model,
    b: &gateway_models::bounds::Bound,
) -> Result<Decimal, ApiError> {
    let per =
        |price: Option<Decimal>, n: u64| price.unwrap_or_default().checked_mul(Decimal::from(n));
    let input_price = [
        m.input_per_mtok,
        m.cache_read_per_mtok,
        m.cache_write_per_mtok,
    ]
    .into_iter()
    .flatten()
    .max();
    let tokens = per(input_price, b.input)
        .zip(per(m.output_per_mtok, b.output))
        .and_then(|(i, o)| (i / MTOK).checked_add(o / MTOK))
        .and_then(|raw| checked_markup(raw, p.markup_pct));
    let images = per(m.per_image, b.images).and_then(|raw| checked_markup(raw, p.markup_pct));
    tokens
        .zip(images)
        .and_then(|(t, i)| t.checked_add(i))
        .ok_or_else(|| pricing_failed(p, m))
}

/// `raw` with `markup_pct` added and rounded as [`with_markup`] does;
/// `None` when it overflows.
fn checked_markup(raw: Decimal, markup_pct: Decimal) -> Option<Decimal> {
    let factor = Decimal::ONE.checked_add(markup_pct.checked_div(Decimal::ONE_HUNDRED)?)?;
    raw.checked_mul(factor)
        .map(gateway_base::billing::round_charge)
}

/// 500 "pricing calculation failed": the cost of a request on `m` of `p`
/// cannot be computed (what overflowed is logged).
pub fn pricing_failed(p: &Provider, m: &Model) -> ApiError {
    ApiError::bug(format!(
        "the cost of a request on {}/{} overflows a decimal",
        p.id, m.id
    ))
    .saying("pricing calculation failed")
}

/// The cost of `t` on `m` before markup: each of the four counts at its
/// own price (cache prices default to the input price), so a cached or
/// written prompt token is never billed again as input.
pub(super) fn raw_token_cost(m: &Model, t: Tokens) -> Decimal {
    let at = |price: Option<Decimal>, n: u64| price.unwrap_or_default() * Decimal::from(n) / MTOK;
    at(m.input_per_mtok, t.input)
        + at(m.output_per_mtok, t.output)
        + at(m.cache_read_price(), t.cache_read)
        + at(m.cache_write_price(), t.cache_write)
}

/// What a realtime response used on `m`, before markup: text and audio
/// tokens each at its price (audio at `input_audio_per_mtok` /
/// `output_audio_per_mtok`, the text price when the model gives none),
/// cached input at the cache-read price.
pub(super) fn realtime_raw_cost(m: &Model, u: &RealtimeUsage) -> Decimal {
    let at = |price: Option<Decimal>, n: u64| price.unwrap_or_default() * Decimal::from(n) / MTOK;
    let audio_in = m.input_audio_per_mtok.or(m.input_per_mtok);
    let audio_out = m.output_audio_per_mtok.or(m.output_per_mtok);
    at(m.input_per_mtok, u.text_in - u.cached_text)
        + at(audio_in, u.audio_in - u.cached_audio)
        + at(m.cache_read_price(), u.cached_text + u.cached_audio)
        + at(m.output_per_mtok, u.text_out)
        + at(audio_out, u.audio_out)
}

/// The most a realtime response of bound `b` can cost on `m` of `p`,
/// markup included (what is held): each input at the higher of its price
/// and the cache price, the output cap at the higher output price.
pub fn realtime_bound_cost(
    p: &Provider,
    m: &Model,
    b: &ResponseBound,
) -> Result<Decimal, ApiError> {
    let max = |a: Option<Decimal>, b: Option<Decimal>| a.into_iter().chain(b).max();
    let per = |price: Option<Decimal>, n: u64| {
        price
            .unwrap_or_default()
            .checked_mul(Decimal::from(n))
            .map(|c| c / MTOK)
    };
    let cache = m.cache_read_per_mtok;
    let text_in = max(m.input_per_mtok, cache);
    let audio_in = max(m.input_audio_per_mtok.or(m.input_per_mtok), cache);
    let out = max(m.output_per_mtok, m.output_audio_per_mtok);
    [
        per(text_in, b.text_in),
        per(audio_in, b.audio_in),
        per(out, b.output),
    ]
    .into_iter()
    .try_fold(Decimal::ZERO, |sum, c| c.and_then(|c| sum.checked_add(c)))
    .and_then(|raw| checked_markup(raw, p.markup_pct))
    .ok_or_else(|| pricing_failed(p, m))
}

/// The charge of `n` images of `m`, markup included, 8 places.
pub fn image_cost(p: &Provider, m: &Model, n: u64) -> Decimal {
    with_markup(
        m.per_image.unwrap_or_default() * Decimal::from(n),
        p.markup_pct,
    )
}

/// The charge of `seconds` of `m`, markup included, 8 places; `Err`: 500
/// "pricing calculation failed" when it overflows ([`pricing_failed`]).
/// (`per_second`, else `per_minute`; unpriced: 0).
pub fn seconds_cost(p: &Provider, m: &Model, seconds: Decimal) -> Result<Decimal, ApiError> {
    if m.per_second.is_none() && m.per_minute.is_none() {
        return Ok(Decimal::ZERO);
    }
    m.seconds_cost(seconds)
        .and_then(|raw| checked_markup(raw, p.markup_pct))
        .ok_or_else(|| pricing_failed(p, m))
}

/// The charge of `chars` characters of speech input on `m` at its
/// `per_1k_chars`, markup included, 8 places (unpriced: 0); `Err` as
/// [`seconds_cost`]'s.
pub fn chars_cost(p: &Provider, m: &Model, chars: u64) -> Result<Decimal, ApiError> {
    if m.per_1k_chars.is_none() {
        return Ok(Decimal::ZERO);
    }
    m.chars_cost(chars)
        .and_then(|raw| checked_markup(raw, p.markup_pct))
        .ok_or_else(|| pricing_failed(p, m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gateway_models::bounds::Bound;
    use gateway_models::providers::ModelType;
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn the_hold_bounds_every_split_of_the_prompt_between_input_and_cache() {
        let m = Model {
            id: "claude-sim".into(),
            kind: ModelType::Chat,
            context_window: None,
            aliases: vec![],
            input_per_mtok: Some(d("3.00")),
            output_per_mtok: Some(d("15.00")),
            cache_read_per_mtok: Some(d("0.30")),
            cache_write_per_mtok: Some(d("3.75")),
            per_image: None,
            per_second: None,
            per_minute: None,
            per_1k_chars: None,
            input_audio_per_mtok: None,
            output_audio_per_mtok: None,
            max_output_tokens: None,
            cache_ttl_secs: None,
            cache_hit_price_pct: Default::default(),
            batch_price_pct: Default::default(),
            limits: Default::default(),
        };
        let p = Provider {
            id: "claude".into(),
            kind: "anthropic".into(),
            base_url: "http://127.0.0.1:1".into(),
            key: None,
            api_key_env: "UNSET".into(),
            markup_pct: d("10"),
            responses: false,
            models: vec![],
            adapter: std::sync::Arc::new(gateway_models::providers::anthropic::Anthropic),
        };
        let b = Bound {
            input: 1000,
            output: 100,
            images: 0,
        };
        let hold = bound_cost(&p, &m, &b).unwrap();
        let charge = |t: Tokens| with_markup(raw_token_cost(&m, t), p.markup_pct);
        for (input, read, write) in [(1000, 0, 0), (0, 1000, 0), (0, 0, 1000), (200, 500, 300)] {
            let t = Tokens {
                input,
                output: 100,
                cache_read: read,
                cache_write: write,
            };
            assert!(charge(t) <= hold, "{t:?}: {} > {hold}", charge(t));
        }
        // The dearest split (all written to the cache) is exactly the hold.
        let all_written = Tokens {
            input: 0,
            output: 100,
            cache_read: 0,
            cache_write: 1000,
        };
        assert_eq!(charge(all_written), hold);
        // Each count at its own price: 200 × 3 + 100 × 15 + 500 × 0.3 + 300 × 3.75 per million.
        let mixed = Tokens {
            input: 200,
            output: 100,
            cache_read: 500,
            cache_write: 300,
        };
        assert_eq!(raw_token_cost(&m, mixed), d("0.003375"));
    }
}
