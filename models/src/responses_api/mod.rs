//! OpenAI's Responses API as an input dialect (`POST /responses`): pure
//! translations between its shapes and the chat completion shapes the
//! chat path speaks, so that a chat model of any provider answers it. A
//! provider that serves `/responses` itself is sent the caller's body as
//! it came and answers as it does; only its usage is read ([`native`]).
//!
//! * [`request`]: the request's `input` as normalized items (what the
//!   gateway stores), and a request with its earlier conversation → the
//!   chat path's body.
//! * [`answer`]: a chat completion (JSON) → a `response` object, and what
//!   every response repeats of its request ([`answer::Echo`]).
//! * [`events`]: chat completion chunks (server-sent events) → the
//!   Responses event stream, one upstream chunk at a time.
//! * [`native`]: a native Responses stream read for its usage alone.
//!
//! **Input items** ([`request::input_items`]). A string `input` is one
//! user `message` of one `input_text` part. A message item (`type:
//! message`, or no `type` but a `role`) of string content gets it as one
//! part: `input_text`, or `output_text` for an `assistant` (the shape of
//! an output message, which is what an assistant item is when stored).
//! An item of neither `type` nor `role` but an `id` is an
//! `item_reference`. `message`, `function_call`, `function_call_output`,
//! `reasoning` and `item_reference` items are checked field by field;
//! items of the hosted tools' types are kept as sent (a native provider
//! reads them). Each `message`, `function_call` and
//! `function_call_output` without an `id` is given one (`msg_…`, `fc_…`,
//! `fco_…`): stored items are listed by id. A malformed item is a 400
//! naming its path (`input[2].content[0].text: …`).
//!
//! **To chat completions** ([`request::to_chat`]), field by field:
//! `model`, `temperature`, `top_p`, `user`, `parallel_tool_calls`,
//! `prompt_cache_key`, `safety_identifier`, `service_tier` and the
//! gateway's own fields (`byok_api_key`, `models`, `additional_params`)
//! are copied; `instructions` is a first `system` message; the earlier
//! conversation, then `input`, become messages: a message's `input_text`,
//! `output_text` and `refusal` parts are `text` parts (one text part alone
//! is the content string), an `input_image` an `image_url` part
//! (`{url, detail}`), an `input_file` of inline `file_data` a `file` part;
//! role `developer` is `system` (chat's `developer` role is OpenAI's
//! alone, `system` is what every provider reads the same way); the
//! `function_call` items following an assistant message (or each other)
//! are that message's `tool_calls` (`id` = `call_id`), a
//! `function_call_output` a `tool` message (a list output: its text
//! parts joined). `reasoning` items are dropped: they are a model's own
//! thinking, which chat has no field to resend (OpenAI's encrypted
//! reasoning means nothing to another provider). `tools` of `type:
//! function` → chat's `function` tools (`strict` only when given: its
//! default is the provider's); `tool_choice` `auto` / `none` / `required`
//! / `{type: function, name}` → chat's; `max_output_tokens` →
//! `max_completion_tokens`; `text.format` → `response_format` (`text`:
//! none, `json_object`, `json_schema` with its `name`, `schema`,
//! `strict`, `description`); `text.verbosity` → `verbosity`;
//! `reasoning.effort` → `reasoning_effort` (`reasoning.summary` and
//! `generate_summary`, the detail of a summary, are dropped: a
//! translated model's reasoning is shown as it comes); `stream: true` →
//! `stream` with `stream_options.include_usage` (the usage chunk that
//! closes a response); the Responses `stream_options` (obfuscation
//! padding) is dropped.
//!
//! Handled by the gateway and not sent: `store`, `background`,
//! `previous_response_id` (the runtime keeps responses and hands their
//! items in as the conversation), `metadata` (kept with the response;
//! chat's `metadata` is stored by OpenAI alone), `truncation` (`disabled`
//! or `auto`: the whole conversation is sent either way, and a
//! conversation too long is the provider's 400, as `disabled` answers),
//! `max_tool_calls` (it limits hosted tools, which a translated model has
//! none of), and `include` when it asks only for
//! `reasoning.encrypted_content` (a translated model has none to give).
//!
//! Refused with a 400 naming the field: a tool of another type than
//! `function` (`tools[i].type: the hosted tool 'web_search' is not offered
//! by this deployment`), a `tool_choice` of a hosted tool or
//! `allowed_tools`, an item with no chat equivalent (a hosted tool's
//! call, an `item_reference`), an image or file held by the provider
//! (`file_id`) or by URL (`file_url`), an image in a function's output,
//! any other `include`, `reasoning` key or `text` key, and any other
//! top-level field (`conversation`, `prompt`, `top_logprobs`, …): a field
//! the caller set that would change the answer is never dropped silently.
//!
//! **Back** ([`answer`], [`events`]): the chat message's reasoning
//! (`reasoning_content` or `reasoning`) is a `reasoning` item of one
//! `summary_text`, its text (and `refusal`) a `message` item, each tool
//! call a `function_call` item; `finish_reason` `length` makes the
//! response `incomplete` (`max_output_tokens`), `content_filter` too
//! (`content_filter`); the usage maps as [`answer::usage`] says, the
//! gateway's `cost` and `byok` copied as they are.

pub mod answer;
pub mod events;
mod items;
pub mod native;
pub mod request;

pub use native::{usage_reader, Kept};
