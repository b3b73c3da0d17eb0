//! Stored responses of the Responses API, kept in the
//! [store](crate::resources::store) by API key and id: the answer, its
//! input items (for `GET /v1/responses/{id}/input_items`, paged as OpenAI
//! pages) and the conversation so far as chat messages (what a later
//! `previous_response_id` continues, and counts as input). Pure data, so
//! the store does not depend on the `/v1` handlers.

use std::collections::HashMap;

use serde_json::{json, Value};

/// One stored response.
#[derive(Clone, Debug)]
pub struct StoredResponse {
    /// The answer once generated (`completed` or `incomplete`).
    pub(super) answer: Value,
    /// The status now: the answer's, or a background response's
    /// `queued` / `in_progress` / `cancelled`.
    pub(super) status: &'static str,
    /// The request's input items, with their ids, oldest first.
    pub(super) input: Vec<Value>,
    /// Earlier turns, this input and this output, as chat messages
    /// (instructions left out: OpenAI does not carry them over).
    pub(super) history: Vec<Value>,
}

impl StoredResponse {
    /// The response object as a read sees it now: the answer, or, while a
    /// background response is unfinished or once cancelled, its request
    /// with that status and no output or usage yet.
    pub(super) fn render(&self) -> Value {
        let mut r = self.answer.clone();
        if self.status != r["status"] {
            r["status"] = json!(self.status);
            r["output"] = json!([]);
            r["usage"] = Value::Null;
            r["incomplete_details"] = Value::Null;
            r["completed_at"] = Value::Null;
        }
        r
    }

    /// True while a background response is still to be generated.
    pub(super) fn pending(&self) -> bool {
        matches!(self.status, "queued" | "in_progress")
    }
}

/// Every stored response: (API key, response id) → response.
#[derive(Default, Debug)]
pub struct Responses {
    /// The responses.
    pub(super) by_id: HashMap<(String, String), StoredResponse>,
}

/// One page of a list in OpenAI's cursor shape: `data` after the item
/// with id `after` (from the start without one), in `order` (`asc`:
/// oldest first; `desc`: newest first), at most `limit` items.
pub(super) fn page(items: &[Value], after: Option<&str>, limit: usize, asc: bool) -> Value {
    let mut ordered: Vec<&Value> = items.iter().collect();
    if !asc {
        ordered.reverse();
    }
    let start = match after {
        Some(id) => ordered
            .iter()
            .position(|i| i["id"] == id)
            .map_or(ordered.len(), |p| p + 1),
        None => 0,
    };
    let rest = &ordered[start..];
    let data: Vec<Value> = rest.iter().take(limit).map(|v| (*v).clone()).collect();
    json!({
        "object": "list",
        "data": data,
        "first_id": data.first().map(|i| i["id"].clone()),
        "last_id": data.last().map(|i| i["id"].clone()),
        "has_more": rest.len() > limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_the_cursor() {
        let items: Vec<Value> = (1..=5).map(|i| json!({"id": format!("m{i}")})).collect();
        let p = page(&items, None, 2, false);
        assert_eq!(p["data"], json!([{"id": "m5"}, {"id": "m4"}]));
        assert_eq!(
            (p["first_id"].clone(), p["has_more"].clone()),
            (json!("m5"), json!(true))
        );
        let p = page(&items, Some("m4"), 2, false);
        assert_eq!(p["last_id"], "m2");
        let p = page(&items, Some("m2"), 2, true);
        assert_eq!(p["data"], json!([{"id": "m3"}, {"id": "m4"}]));
        let p = page(&items, Some("m4"), 5, true);
        assert_eq!(
            (p["data"].as_array().unwrap().len(), p["has_more"].clone()),
            (1, json!(false))
        );
        assert_eq!(page(&items, Some("m1"), 5, false)["first_id"], Value::Null);
    }
}
