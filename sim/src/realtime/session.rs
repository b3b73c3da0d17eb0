//! One Realtime session's state (its settings, the input audio buffer,
//! the conversation, the response in flight) and its answers to each
//! client event, by the rules of [`super`].

use serde_json::{json, Map, Value};

use super::events::{self, error, event, Input, INPUT_AUDIO_TOKENS_PER_SEC};
use super::response::{Plan, Turn};
use crate::SimConfig;

/// What one conversation item counts for.
struct Item {
    /// `user`, `system` or `assistant`.
    role: String,
    /// Its text (empty for audio).
    text: String,
    /// Its input audio tokens.
    audio_tokens: u64,
}

/// One session.
pub struct Session {
    /// The session object (`session.created`, `session.updated`).
    pub session: Value,
    /// `conv_…`.
    conversation_id: String,
    /// Appended input audio not committed yet.
    buffer: Vec<u8>,
    /// The conversation, oldest first, with the last item's id.
    items: Vec<Item>,
    /// The last item's id.
    last_id: Option<String>,
    /// The previous response's input (the cached-token rule).
    previous: Option<Input>,
    /// The response in flight.
    pub turn: Option<Turn>,
}

type Out = Vec<Value>;

/// The client's `event_id`.
fn eid(ev: &Map<String, Value>) -> Option<&str> {
    ev.get("event_id").and_then(Value::as_str)
}

/// `max_output_tokens`: an integer 1..=4096 or `"inf"`.
fn valid_max(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| (1..=4096).contains(&n)) || v == "inf"
}

/// `output_modalities`: `["text"]` or `["audio"]`.
fn valid_modalities(v: &Value) -> bool {
    v == &json!(["text"]) || v == &json!(["audio"])
}

impl Session {
    /// A new session for `model`.
    pub fn new(model: &str) -> Session {
        Session {
            session: events::session(model),
            conversation_id: events::id("conv_"),
            buffer: Vec::new(),
            items: Vec::new(),
            last_id: None,
            previous: None,
            turn: None,
        }
    }

    /// `sess_…`.
    pub fn id(&self) -> String {
        self.session["id"].as_str().unwrap_or_default().to_owned()
    }

    /// `session.created`.
    pub fn created(&self) -> Value {
        event("session.created", json!({"session": self.session}))
    }

    /// The answers to one client text message.
    pub fn handle(&mut self, text: &str, cfg: &SimConfig) -> Out {
        let Ok(Value::Object(ev)) = serde_json::from_str::<Value>(text) else {
            let msg = "The server could not parse the event: expected a JSON object.";
            return vec![error("invalid_json", msg, None)];
        };
        let id = eid(&ev);
        match ev.get("type").and_then(Value::as_str) {
            Some("session.update") => self.update(&ev),
            Some("input_audio_buffer.append") => self.append(&ev),
            Some("input_audio_buffer.commit") => self.commit(id),
            Some("input_audio_buffer.clear") => {
                self.buffer.clear();
                vec![event("input_audio_buffer.cleared", json!({}))]
            }
            Some("conversation.item.create") => self.create_item(&ev),
            Some("response.create") => self.create_response(&ev, cfg),
            Some("response.cancel") => match self.turn.is_some() {
                true => self.end_turn(true),
                false => vec![error(
                    "response_cancel_not_active",
                    "Cancellation failed: no active response found.",
                    id,
                )],
            },
            Some(other) => {
                let msg = format!("Invalid value: '{other}'. Supported values are: 'session.update', 'input_audio_buffer.append', 'input_audio_buffer.commit', 'input_audio_buffer.clear', 'conversation.item.create', 'response.create' and 'response.cancel'.");
                vec![error("invalid_value", &msg, id)]
            }
            None => vec![error(
                "missing_required_parameter",
                "Missing required parameter: 'type'.",
                id,
            )],
        }
    }

    /// `session.update`: its `session` fields merged in.
    fn update(&mut self, ev: &Map<String, Value>) -> Out {
        let id = eid(ev);
        let Some(Value::Object(patch)) = ev.get("session") else {
            let m = "Missing required parameter: 'session'.";
            return vec![error("missing_required_parameter", m, id)];
        };
        let mut patch = patch.clone();
        patch.remove("id");
        patch.remove("object");
        if patch.get("type").is_some_and(|t| t != "realtime") {
            let m = "Invalid value for 'session.type': only 'realtime' sessions are simulated.";
            return vec![error("invalid_value", m, id)];
        }
        if patch
            .get("output_modalities")
            .is_some_and(|m| !valid_modalities(m))
        {
            let m = "Invalid 'session.output_modalities': expected [\"text\"] or [\"audio\"].";
            return vec![error("invalid_value", m, id)];
        }
        if patch
            .get("max_output_tokens")
            .is_some_and(|m| !valid_max(m))
        {
            let m =
                "Invalid 'session.max_output_tokens': expected an integer from 1 to 4096 or 'inf'.";
            return vec![error("invalid_value", m, id)];
        }
        events::merge(&mut self.session, &Value::Object(patch));
        vec![event("session.updated", json!({"session": self.session}))]
    }

    /// Bytes of a second of input audio in the session's input format
    /// (`audio/pcm`: 2 × rate; `audio/pcmu`, `audio/pcma`: 8000).
    fn input_bytes_per_sec(&self) -> u64 {
        let format = &self.session["audio"]["input"]["format"];
        match format["type"].as_str() {
            Some("audio/pcmu" | "audio/pcma") => 8000,
            _ => 2 * format["rate"].as_u64().unwrap_or(24_000),
        }
    }

    /// `input_audio_buffer.append`: `audio` (base64) added to the buffer.
    fn append(&mut self, ev: &Map<String, Value>) -> Out {
        use base64::Engine;
        let audio = ev.get("audio").and_then(Value::as_str);
        let decoded = audio.map(|a| base64::engine::general_purpose::STANDARD.decode(a));
        match decoded {
            Some(Ok(bytes)) => {
                self.buffer.extend_from_slice(&bytes);
                Vec::new()
            }
            Some(Err(_)) => vec![error(
                "invalid_value",
                "Invalid 'audio'. Expected base64-encoded audio bytes.",
                eid(ev),
            )],
            None => vec![error(
                "missing_required_parameter",
                "Missing required parameter: 'audio'.",
                eid(ev),
            )],
        }
    }

    /// Adds an item to the conversation: `(previous_item_id, item_id)`.
    fn push(&mut self, id: String, item: Item) -> (Option<String>, String) {
        self.items.push(item);
        (self.last_id.replace(id.clone()), id)
    }

    /// `conversation.item.added` and `conversation.item.done` of `item`.
    fn added(previous: Option<String>, item: Value) -> Out {
        let fields = json!({"previous_item_id": previous, "item": item});
        vec![
            event("conversation.item.added", fields.clone()),
            event("conversation.item.done", fields),
        ]
    }

    /// `input_audio_buffer.commit`: the buffer becomes a user item (at
    /// least 100 ms of audio, else an error).
    fn commit(&mut self, client_id: Option<&str>) -> Out {
        let per_sec = self.input_bytes_per_sec();
        if (self.buffer.len() as u64) * 10 < per_sec {
            let ms = self.buffer.len() as f64 * 1000.0 / per_sec as f64;
            let m = format!("Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has {ms:.2}ms of audio.");
            return vec![error("input_audio_buffer_commit_empty", &m, client_id)];
        }
        let bytes = std::mem::take(&mut self.buffer).len() as u64;
        let item = Item {
            role: "user".into(),
            text: String::new(),
            audio_tokens: events::audio_tokens(bytes, per_sec, INPUT_AUDIO_TOKENS_PER_SEC),
        };
        let (previous, id) = self.push(events::id("item_"), item);
        let content = json!([{"type": "input_audio", "transcript": null}]);
        let mut out = vec![event(
            "input_audio_buffer.committed",
            json!({"previous_item_id": previous, "item_id": id}),
        )];
        out.extend(Self::added(
            previous,
            events::message(&id, "user", "completed", content),
        ));
        out
    }
}

/// The text and audio tokens of a user or system message's `content`:
/// `input_text` parts' texts joined by spaces, `input_audio` parts' audio
/// (base64, in the session's input format); an assistant's `output_text`
/// or `text` parts. `Err`: the part type the role cannot have.
fn content_of(role: &str, content: &[Value], per_sec: u64) -> Result<(String, u64), String> {
    use base64::Engine;
    let (mut texts, mut audio) = (Vec::new(), 0);
    for part in content {
        let kind = part["type"].as_str().unwrap_or_default();
        match (role, kind) {
            ("user" | "system", "input_text") | ("assistant", "output_text" | "text") => {
                texts.push(part["text"].as_str().unwrap_or_default().to_owned())
            }
            ("user", "input_audio") => {
                let data = part["audio"].as_str().unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|_| "input_audio (base64 audio expected)".to_owned())?;
                audio +=
                    events::audio_tokens(bytes.len() as u64, per_sec, INPUT_AUDIO_TOKENS_PER_SEC);
            }
            _ => return Err(format!("'{kind}' in a {role} message")),
        }
    }
    Ok((texts.join(" "), audio))
}

impl Session {
    /// `conversation.item.create`: a `message` item (roles `user`,
    /// `system`, `assistant`) added to the conversation.
    fn create_item(&mut self, ev: &Map<String, Value>) -> Out {
        let id = eid(ev);
        let Some(item) = ev.get("item").filter(|i| i.is_object()) else {
            let m = "Missing required parameter: 'item'.";
            return vec![error("missing_required_parameter", m, id)];
        };
        if item.get("type").is_some_and(|t| t != "message") {
            let m = "Invalid 'item.type': the simulator takes 'message' items.";
            return vec![error("invalid_value", m, id)];
        }
        let role = item["role"].as_str().unwrap_or_default();
        if !matches!(role, "user" | "system" | "assistant") {
            let m = "Invalid 'item.role': expected 'user', 'system' or 'assistant'.";
            return vec![error("invalid_value", m, id)];
        }
        let content = item["content"].as_array().cloned().unwrap_or_default();
        let (text, audio_tokens) = match content_of(role, &content, self.input_bytes_per_sec()) {
            Ok(c) => c,
            Err(what) => {
                let m = format!("Invalid 'item.content': {what}.");
                return vec![error("invalid_value", &m, id)];
            }
        };
        let item_id = item["id"]
            .as_str()
            .map_or_else(|| events::id("item_"), str::to_owned);
        let role = role.to_owned();
        let entry = Item {
            role: role.clone(),
            text,
            audio_tokens,
        };
        let (previous, item_id) = self.push(item_id, entry);
        Self::added(
            previous,
            events::message(&item_id, &role, "completed", Value::Array(content)),
        )
    }

    /// `response.create`: a response planned from the session's settings
    /// (the `response` object's `output_modalities`, `max_output_tokens`,
    /// `instructions` first); its head events now.
    fn create_response(&mut self, ev: &Map<String, Value>, cfg: &SimConfig) -> Out {
        let id = eid(ev);
        if let Some(t) = &self.turn {
            let m = format!("Conversation already has an active response in progress: {}. Wait until the response is finished before creating a new one.", t.id);
            return vec![error("conversation_already_has_active_response", &m, id)];
        }
        let empty = json!({});
        let asked = match ev.get("response") {
            None | Some(Value::Null) => &empty,
            Some(r) if r.is_object() => r,
            Some(_) => {
                return vec![error(
                    "invalid_value",
                    "Invalid 'response': expected an object.",
                    id,
                )]
            }
        };
        let pick = |k: &str| asked.get(k).unwrap_or(&self.session[k]).clone();
        let (modalities, max) = (pick("output_modalities"), pick("max_output_tokens"));
        if !valid_modalities(&modalities) {
            let m = "Invalid 'response.output_modalities': expected [\"text\"] or [\"audio\"].";
            return vec![error("invalid_value", m, id)];
        }
        if !valid_max(&max) {
            let m = "Invalid 'response.max_output_tokens': expected an integer from 1 to 4096 or 'inf'.";
            return vec![error("invalid_value", m, id)];
        }
        let instructions = pick("instructions");
        let mut input = Input {
            text: events::words(instructions.as_str().unwrap_or_default()),
            ..Input::default()
        };
        for item in &self.items {
            input.text += events::words(&item.text);
            input.audio += item.audio_tokens;
        }
        let input = input.cached_after(self.previous.replace(input));
        let prompt = self.items.iter().rev().find(|i| i.role == "user");
        let plan = Plan {
            conversation_id: self.conversation_id.clone(),
            audio: modalities == json!(["audio"]),
            voice: self.session["audio"]["output"]["voice"]
                .as_str()
                .unwrap_or("alloy")
                .to_owned(),
            max_output_tokens: max,
            prompt: prompt.map(|i| i.text.clone()).unwrap_or_default(),
            seconds_per_char: cfg.seconds_per_char,
            factor: cfg.realtime_usage_factor,
            input,
        };
        let turn = Turn::new(plan);
        let head = turn.head();
        self.turn = Some(turn);
        head
    }

    /// The response's next step: a word's deltas, or its end.
    pub fn tick(&mut self) -> Out {
        match self.turn.as_mut().and_then(Turn::step) {
            Some(out) => out,
            None => self.end_turn(false),
        }
    }

    /// Ends the response in flight (`cancelled` by the client or not):
    /// its done events; its text joins the conversation.
    fn end_turn(&mut self, cancelled: bool) -> Out {
        let Some(turn) = self.turn.take() else {
            return Vec::new();
        };
        let out = turn.finish(cancelled);
        let item = Item {
            role: "assistant".into(),
            text: turn.text_sent(),
            audio_tokens: 0,
        };
        self.push(turn.item_id.clone(), item);
        out
    }
}
