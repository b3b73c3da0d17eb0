//! The four token counts of a model request and how they are read from an
//! OpenAI-shaped `usage` object (every adapter's answer is OpenAI's shape:
//! native providers' usage is translated into it first).
//!
//! OpenAI counts cached tokens inside `prompt_tokens`
//! (`prompt_tokens_details.cached_tokens`); a cache write, which OpenAI does
//! not report, is carried the same way as
//! `prompt_tokens_details.cache_creation_tokens` by the native adapters.
//! Both are taken **out** of the input: each token is billed once, at its
//! own price (`runtime::money`).

use rust_decimal::prelude::ToPrimitive;
use serde_json::{json, Value};

/// What a model request used, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    /// Prompt tokens neither read from nor written to a cache.
    pub input: u64,
    /// Output (completion) tokens.
    pub output: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
}

fn field(u: &Value, k: &str) -> Option<u64> {
    gateway_base::billing::quantity_from_upstream(k, u.get(k))
        .valid()
        .and_then(|d| d.ceil().to_u64())
}

impl Tokens {
    /// Input and output only.
    pub fn new(input: u64, output: u64) -> Tokens {
        Tokens {
            input,
            output,
            ..Tokens::default()
        }
    }

    /// Every prompt token, cached or not.
    pub fn prompt(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
    }

    /// The counts of an OpenAI `usage` object; `None` unless it has both
    /// `prompt_tokens` and `completion_tokens`.
    pub fn from_openai(u: &Value) -> Option<Tokens> {
        Tokens::split(
            u,
            [
                "prompt_tokens",
                "completion_tokens",
                "prompt_tokens_details",
            ],
            "cache_creation_tokens",
        )
    }

    /// The counts of a Responses API `usage` object (a native `/responses`
    /// answer's, or its stream's last event's); `None` unless it has both
    /// `input_tokens` and `output_tokens`. As [`Tokens::from_openai`]:
    /// the cached tokens (`input_tokens_details.cached_tokens`) and cache
    /// writes (`cache_write_tokens`) come out of the input; reasoning
    /// tokens are inside `output_tokens` already.
    pub fn from_responses(u: &Value) -> Option<Tokens> {
        Tokens::split(
            u,
            ["input_tokens", "output_tokens", "input_tokens_details"],
            "cache_write_tokens",
        )
    }

    /// The counts of a usage object whose prompt, output and prompt
    /// details are `[prompt, output, details]`: the details' `cached_tokens`
    /// and `write` (cache writes) taken out of the prompt.
    fn split(u: &Value, [prompt, output, details]: [&str; 3], write: &str) -> Option<Tokens> {
        let prompt = field(u, prompt)?;
        let output = field(u, output)?;
        let details = u.get(details).cloned().unwrap_or_default();
        let read = field(&details, "cached_tokens").unwrap_or(0).min(prompt);
        let write = field(&details, write).unwrap_or(0).min(prompt - read);
        Some(Tokens {
            input: prompt - read - write,
            output,
            cache_read: read,
            cache_write: write,
        })
    }

    /// The OpenAI `usage` object of these counts (cached tokens inside
    /// `prompt_tokens`, as OpenAI reports them).
    pub fn to_openai(&self) -> Value {
        let prompt = self.prompt();
        let mut u = json!({
            "prompt_tokens": prompt,
            "completion_tokens": self.output,
            "total_tokens": prompt.saturating_add(self.output),
        });
        if self.cache_read > 0 || self.cache_write > 0 {
            u["prompt_tokens_details"] = json!({
                "cached_tokens": self.cache_read,
                "cache_creation_tokens": self.cache_write,
            });
        }
        u
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_come_out_of_the_input_and_back() {
        let u = json!({"prompt_tokens": 100, "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60, "cache_creation_tokens": 30}});
        let t = Tokens::from_openai(&u).unwrap();
        assert_eq!(
            t,
            Tokens {
                input: 10,
                output: 7,
                cache_read: 60,
                cache_write: 30
            }
        );
        assert_eq!(Tokens::from_openai(&t.to_openai()), Some(t));
        // More cached than prompted: never a negative input.
        let u = json!({"prompt_tokens": 5, "completion_tokens": 1,
            "prompt_tokens_details": {"cached_tokens": 60}});
        assert_eq!(Tokens::from_openai(&u).unwrap().prompt(), 5);
        assert_eq!(Tokens::from_openai(&json!({"prompt_tokens": 5})), None);
    }

    #[test]
    fn responses_usage_reads_like_openai_usage() {
        let u = json!({"input_tokens": 100, "output_tokens": 7, "total_tokens": 107,
            "input_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
            "output_tokens_details": {"reasoning_tokens": 5}, "cost": 0.5});
        assert_eq!(
            Tokens::from_responses(&u),
            Some(Tokens {
                input: 10,
                output: 7,
                cache_read: 60,
                cache_write: 30
            })
        );
        let u = json!({"input_tokens": 5, "output_tokens": 1,
            "input_tokens_details": {"cached_tokens": 60}});
        assert_eq!(Tokens::from_responses(&u).unwrap().prompt(), 5);
        assert_eq!(Tokens::from_responses(&json!({"input_tokens": 5})), None);
        assert_eq!(
            Tokens::from_responses(&json!({"prompt_tokens": 5, "completion_tokens": 1})),
            None
        );
    }
}
