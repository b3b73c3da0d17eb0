//! Responses that server VAD would create by itself, created by the
//! gateway instead, after their hold.
//!
//! With `audio.input.turn_detection` on and its `create_response` true
//! (OpenAI's default), the provider starts a response whenever it commits
//! the caller's speech, and no `response.create` passes the gateway to be
//! held. So the provider is never left to: the caller's `session.update`
//! goes upstream with `create_response: false` (its wish kept here), a
//! session the provider opens that way is updated so at once, and when the
//! provider commits the buffer (`input_audio_buffer.committed`) while the
//! caller wants responses, the gateway sends the `response.create` itself
//! (held as the caller's would be; refused with `insufficient_credits` the
//! same way). The session events the caller sees show its own
//! `create_response`.

use serde_json::{json, Value};

/// The caller's wish and the session's state of turn detection.
#[derive(Debug, Default)]
pub(super) struct Vad {
    /// Turn detection is on (an object, not `null`).
    on: bool,
    /// The caller wants a response at each turn's end.
    wanted: bool,
}

const PATH: &str = "/session/audio/input/turn_detection";

impl Vad {
    /// A caller's `session.update`: its `create_response` noted and sent
    /// as `false`.
    pub fn client_update(&mut self, event: &mut Value) {
        let Some(td) = event.pointer_mut(PATH) else {
            return;
        };
        match td.as_object_mut() {
            Some(o) => {
                self.wanted = o
                    .get("create_response")
                    .and_then(Value::as_bool)
                    .unwrap_or(true);
                o.insert("create_response".into(), Value::Bool(false));
            }
            None => self.wanted = false,
        }
    }

    /// A provider's `session.created` / `session.updated`: the caller's
    /// view put back; the update to send when the provider would create
    /// responses by itself.
    pub fn server_session(&mut self, event: &mut Value) -> Option<Value> {
        let td = event.pointer_mut(PATH)?;
        let Some(o) = td.as_object_mut() else {
            self.on = false;
            return None;
        };
        self.on = true;
        let by_itself = o
            .get("create_response")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let fix = by_itself.then(|| {
            self.wanted = true;
            let mut off = Value::Object(o.clone());
            off["create_response"] = Value::Bool(false);
            json!({"type": "session.update", "event_id": "event_gw_vad",
                   "session": {"type": "realtime", "audio": {"input": {"turn_detection": off}}}})
        });
        o.insert("create_response".into(), Value::Bool(self.wanted));
        fix
    }

    /// Whether the provider's commit of the buffer starts a response the
    /// gateway creates.
    pub fn responds(&self) -> bool {
        self.on && self.wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_never_creates_a_response_itself() {
        let mut v = Vad::default();
        let mut created = json!({"type": "session.created", "session": {"audio": {"input":
            {"turn_detection": {"type": "server_vad", "create_response": true}}}}});
        let fix = v.server_session(&mut created).unwrap();
        assert_eq!(
            fix["session"]["audio"]["input"]["turn_detection"]["create_response"],
            false
        );
        assert_eq!(created.pointer(PATH).unwrap()["create_response"], true);
        assert!(v.responds());
        let mut update = json!({"type": "session.update", "session": {"audio": {"input":
            {"turn_detection": {"type": "server_vad", "create_response": false}}}}});
        v.client_update(&mut update);
        assert!(!v.responds());
        let mut update = json!({"type": "session.update", "session": {"audio": {"input":
            {"turn_detection": {"type": "semantic_vad"}}}}});
        v.client_update(&mut update);
        assert_eq!(update.pointer(PATH).unwrap()["create_response"], false);
        assert!(v.responds());
        let mut off = json!({"session": {"audio": {"input": {"turn_detection": null}}}});
        assert!(v.server_session(&mut off).is_none());
        assert!(!v.responds());
    }
}
