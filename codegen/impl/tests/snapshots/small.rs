const _: &str = ::core::include_str!("/path/to/endpoints.toml");
/// `POST /api/v1/voice/tts/synthesize`: Synthesize speech from text (row `tts.synthesize`).
pub static TTS_SYNTHESIZE: ::runtime::__private::EndpointSpec = ::runtime::__private::EndpointSpec {
    id: "tts.synthesize",
    area: ::runtime::__private::Area::Voice,
    method: ::runtime::__private::Method::Post,
    path: "/api/v1/voice/tts/synthesize",
    params: &[],
    mode: ::runtime::__private::Mode::Synthesize,
    capability: "tts",
    billing: ::runtime::__private::Billing::AudioSeconds,
    metering: ::runtime::__private::Metering::Measured,
    resource: ::core::option::Option::None,
    owner_checks: &[],
    gate: ::core::option::Option::None,
    auth: ::runtime::__private::Auth::Bearer,
    errors: ::runtime::__private::ErrorFormat::Detail,
    upstream: ::core::option::Option::Some(::runtime::__private::Upstream {
        base: ::runtime::__private::Base::Synth,
        method: ::runtime::__private::Method::Post,
        path: "/synthesize",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth: ::runtime::__private::UpstreamAuth::AccessToken,
    }),
    body: &[
        ::runtime::__private::FieldRule {
            name: "text",
            ty: ::runtime::__private::FieldType::String,
            required: true,
            max_len: ::core::option::Option::Some(10000),
            min: ::core::option::Option::None,
            max: ::core::option::Option::None,
            one_of: &[],
        },
        ::runtime::__private::FieldRule {
            name: "output_format",
            ty: ::runtime::__private::FieldType::String,
            required: false,
            max_len: ::core::option::Option::None,
            min: ::core::option::Option::None,
            max: ::core::option::Option::None,
            one_of: &["mp3", "wav"],
        },
        ::runtime::__private::FieldRule {
            name: "pitch",
            ty: ::runtime::__private::FieldType::Number,
            required: false,
            max_len: ::core::option::Option::None,
            min: ::core::option::Option::Some(-2.0),
            max: ::core::option::Option::Some(2.0),
            one_of: &[],
        },
    ],
    query: &[],
    rename: &[
        ::runtime::__private::Rename {
            from: "text",
            to: "data",
        },
    ],
    drop: &[],
    set: ::core::option::Option::Some("{\"fill\":false}"),
    file_field: ::core::option::Option::None,
    job: ::core::option::Option::None,
    mirror: ::core::option::Option::None,
    retention_days: ::core::option::Option::Some(7),
    translate: false,
    summary: "Synthesize speech from text",
};
/// `GET /api/v1/voice/agents/capabilities` (row `agents.capabilities`).
pub static AGENTS_CAPABILITIES: ::runtime::__private::EndpointSpec = ::runtime::__private::EndpointSpec {
    id: "agents.capabilities",
    area: ::runtime::__private::Area::Voice,
    method: ::runtime::__private::Method::Get,
    path: "/api/v1/voice/agents/capabilities",
    params: &[],
    mode: ::runtime::__private::Mode::Proxy,
    capability: "agents",
    billing: ::runtime::__private::Billing::Free,
    metering: ::runtime::__private::Metering::None,
    resource: ::core::option::Option::None,
    owner_checks: &[],
    gate: ::core::option::Option::None,
    auth: ::runtime::__private::Auth::Bearer,
    errors: ::runtime::__private::ErrorFormat::Detail,
    upstream: ::core::option::Option::Some(::runtime::__private::Upstream {
        base: ::runtime::__private::Base::Main,
        method: ::runtime::__private::Method::Get,
        path: "/agents/capabilities",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth: ::runtime::__private::UpstreamAuth::Bearer,
    }),
    body: &[],
    query: &[],
    rename: &[],
    drop: &[],
    set: ::core::option::Option::None,
    file_field: ::core::option::Option::None,
    job: ::core::option::Option::None,
    mirror: ::core::option::Option::None,
    retention_days: ::core::option::Option::None,
    translate: false,
    summary: "",
};
/// `GET /api/v1/voice/agents/{uuid}`: One agent (row `agents.get`).
pub static AGENTS_GET: ::runtime::__private::EndpointSpec = ::runtime::__private::EndpointSpec {
    id: "agents.get",
    area: ::runtime::__private::Area::Voice,
    method: ::runtime::__private::Method::Get,
    path: "/api/v1/voice/agents/{uuid}",
    params: &["uuid"],
    mode: ::runtime::__private::Mode::Proxy,
    capability: "agents",
    billing: ::runtime::__private::Billing::Free,
    metering: ::runtime::__private::Metering::None,
    resource: ::core::option::Option::None,
    owner_checks: &[],
    gate: ::core::option::Option::None,
    auth: ::runtime::__private::Auth::Bearer,
    errors: ::runtime::__private::ErrorFormat::Detail,
    upstream: ::core::option::Option::Some(::runtime::__private::Upstream {
        base: ::runtime::__private::Base::Main,
        method: ::runtime::__private::Method::Get,
        path: "/owners/{owner}/agents/{uuid}",
        from_query: &["owner"],
        from_body: &[],
        from_parent: &[],
        auth: ::runtime::__private::UpstreamAuth::Bearer,
    }),
    body: &[],
    query: &[
        ::runtime::__private::FieldRule {
            name: "owner",
            ty: ::runtime::__private::FieldType::String,
            required: true,
            max_len: ::core::option::Option::None,
            min: ::core::option::Option::None,
            max: ::core::option::Option::None,
            one_of: &[],
        },
    ],
    rename: &[],
    drop: &[],
    set: ::core::option::Option::None,
    file_field: ::core::option::Option::None,
    job: ::core::option::Option::None,
    mirror: ::core::option::Option::None,
    retention_days: ::core::option::Option::None,
    translate: false,
    summary: "One agent",
};
/// `DELETE /api/v1/voice/agents/{uuid}` (row `agents.delete`).
pub static AGENTS_DELETE: ::runtime::__private::EndpointSpec = ::runtime::__private::EndpointSpec {
    id: "agents.delete",
    area: ::runtime::__private::Area::Voice,
    method: ::runtime::__private::Method::Delete,
    path: "/api/v1/voice/agents/{uuid}",
    params: &["uuid"],
    mode: ::runtime::__private::Mode::Proxy,
    capability: "agents",
    billing: ::runtime::__private::Billing::VoiceSubscription,
    metering: ::runtime::__private::Metering::None,
    resource: ::core::option::Option::None,
    owner_checks: &[],
    gate: ::core::option::Option::Some(::runtime::__private::Gate::BusinessPlan),
    auth: ::runtime::__private::Auth::Bearer,
    errors: ::runtime::__private::ErrorFormat::Error,
    upstream: ::core::option::Option::Some(::runtime::__private::Upstream {
        base: ::runtime::__private::Base::Main,
        method: ::runtime::__private::Method::Delete,
        path: "/agents/{uuid}",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth: ::runtime::__private::UpstreamAuth::Bearer,
    }),
    body: &[],
    query: &[],
    rename: &[],
    drop: &[],
    set: ::core::option::Option::None,
    file_field: ::core::option::Option::None,
    job: ::core::option::Option::None,
    mirror: ::core::option::Option::None,
    retention_days: ::core::option::Option::None,
    translate: false,
    summary: "",
};
/// `POST /api/v1/voice/stt` (row `stt.submit`).
pub static STT_SUBMIT: ::runtime::__private::EndpointSpec = ::runtime::__private::EndpointSpec {
    id: "stt.submit",
    area: ::runtime::__private::Area::Voice,
    method: ::runtime::__private::Method::Post,
    path: "/api/v1/voice/stt",
    params: &[],
    mode: ::runtime::__private::Mode::JobSubmit,
    capability: "stt",
    billing: ::runtime::__private::Billing::AudioSeconds,
    metering: ::runtime::__private::Metering::Measured,
    resource: ::core::option::Option::None,
    owner_checks: &[],
    gate: ::core::option::Option::None,
    auth: ::runtime::__private::Auth::Bearer,
    errors: ::runtime::__private::ErrorFormat::Detail,
    upstream: ::core::option::Option::Some(::runtime::__private::Upstream {
        base: ::runtime::__private::Base::Main,
        method: ::runtime::__private::Method::Post,
        path: "/stt",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth: ::runtime::__private::UpstreamAuth::Bearer,
    }),
    body: &[],
    query: &[],
    rename: &[],
    drop: &[],
    set: ::core::option::Option::None,
    file_field: ::core::option::Option::None,
    job: ::core::option::Option::Some("stt"),
    mirror: ::core::option::Option::None,
    retention_days: ::core::option::Option::None,
    translate: false,
    summary: "",
};
/// `GET /api/v1/voice/stt/{uuid}` (row `stt.get`).
pub static STT_GET: ::runtime::__private::EndpointSpec = ::runtime::__private::EndpointSpec {
    id: "stt.get",
    area: ::runtime::__private::Area::Voice,
    method: ::runtime::__private::Method::Get,
    path: "/api/v1/voice/stt/{uuid}",
    params: &["uuid"],
    mode: ::runtime::__private::Mode::JobGet,
    capability: "stt",
    billing: ::runtime::__private::Billing::Free,
    metering: ::runtime::__private::Metering::None,
    resource: ::core::option::Option::None,
    owner_checks: &[],
    gate: ::core::option::Option::None,
    auth: ::runtime::__private::Auth::Bearer,
    errors: ::runtime::__private::ErrorFormat::Detail,
    upstream: ::core::option::Option::Some(::runtime::__private::Upstream {
        base: ::runtime::__private::Base::Main,
        method: ::runtime::__private::Method::Get,
        path: "/stt/{uuid}",
        from_query: &[],
        from_body: &[],
        from_parent: &[],
        auth: ::runtime::__private::UpstreamAuth::Bearer,
    }),
    body: &[],
    query: &[],
    rename: &[],
    drop: &[],
    set: ::core::option::Option::None,
    file_field: ::core::option::Option::None,
    job: ::core::option::Option::Some("stt"),
    mirror: ::core::option::Option::Some("item.result_url"),
    retention_days: ::core::option::Option::None,
    translate: false,
    summary: "",
};
/// `POST /api/v1/voice/webhooks/provider` (row `webhooks.provider`).
pub static WEBHOOKS_PROVIDER: ::runtime::__private::EndpointSpec = ::runtime::__private::EndpointSpec {
    id: "webhooks.provider",
    area: ::runtime::__private::Area::Voice,
    method: ::runtime::__private::Method::Post,
    path: "/api/v1/voice/webhooks/provider",
    params: &[],
    mode: ::runtime::__private::Mode::Webhook,
    capability: "webhook",
    billing: ::runtime::__private::Billing::Free,
    metering: ::runtime::__private::Metering::None,
    resource: ::core::option::Option::None,
    owner_checks: &[],
    gate: ::core::option::Option::None,
    auth: ::runtime::__private::Auth::Signature,
    errors: ::runtime::__private::ErrorFormat::Detail,
    upstream: ::core::option::Option::None,
    body: &[],
    query: &[],
    rename: &[],
    drop: &[],
    set: ::core::option::Option::None,
    file_field: ::core::option::Option::None,
    job: ::core::option::Option::None,
    mirror: ::core::option::Option::None,
    retention_days: ::core::option::Option::None,
    translate: false,
    summary: "",
};
/// Every row of the route table, in table order.
pub static ROUTES: &[&::runtime::__private::EndpointSpec] = &[
    &TTS_SYNTHESIZE,
    &AGENTS_CAPABILITIES,
    &AGENTS_GET,
    &AGENTS_DELETE,
    &STT_SUBMIT,
    &STT_GET,
    &WEBHOOKS_PROVIDER,
];
/// Number of rows in [`ROUTES`].
pub const ROUTE_COUNT: usize = 7;
/// The OpenAPI 3.1 document of the table (JSON text), served at `/openapi.json`.
pub static OPENAPI_JSON: &str = "{\"components\":{\"headers\":{\"X-Request-Id\":{\"description\":\"The request id (`res_` + 24 hex characters), also in the audit record and the logs.\",\"schema\":{\"type\":\"string\"}}},\"responses\":{\"ErrorAnthropic\":{\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/ErrorAnthropic\"}}},\"description\":\"Error (Anthropic's shape)\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"ErrorDetail\":{\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/ErrorDetail\"}}},\"description\":\"Error (voice area)\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"ErrorEnvelope\":{\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/ErrorEnvelope\"}}},\"description\":\"Error (format 2, envelope)\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"ErrorFormat1\":{\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/ErrorFormat1\"}}},\"description\":\"Error (format 1)\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"ErrorGemini\":{\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/ErrorGemini\"}}},\"description\":\"Error (Google's shape)\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"ErrorOpenAi\":{\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/ErrorOpenAi\"}}},\"description\":\"Error (format 2 with OpenAI's error object)\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}}},\"schemas\":{\"ErrorAnthropic\":{\"properties\":{\"error\":{\"properties\":{\"message\":{\"type\":\"string\"},\"type\":{\"type\":\"string\"}},\"required\":[\"type\",\"message\"],\"type\":\"object\"},\"type\":{\"const\":\"error\"}},\"required\":[\"type\",\"error\"],\"type\":\"object\"},\"ErrorDetail\":{\"properties\":{\"detail\":{\"type\":\"string\"}},\"required\":[\"detail\"],\"type\":\"object\"},\"ErrorEnvelope\":{\"properties\":{\"data\":{\"const\":\"\"},\"message\":{\"type\":\"string\"},\"request_id\":{\"type\":\"string\"},\"success\":{\"const\":false}},\"required\":[\"request_id\",\"success\",\"message\",\"data\"],\"type\":\"object\"},\"ErrorFormat1\":{\"properties\":{\"details\":{},\"error\":{\"type\":\"string\"},\"message\":{\"type\":\"string\"},\"status_code\":{\"type\":\"integer\"}},\"required\":[\"error\",\"message\",\"status_code\",\"details\"],\"type\":\"object\"},\"ErrorGemini\":{\"properties\":{\"error\":{\"properties\":{\"code\":{\"type\":\"integer\"},\"message\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"}},\"required\":[\"code\",\"message\",\"status\"],\"type\":\"object\"}},\"required\":[\"error\"],\"type\":\"object\"},\"ErrorOpenAi\":{\"properties\":{\"data\":{\"type\":\"string\"},\"error\":{\"properties\":{\"message\":{\"type\":\"string\"},\"type\":{\"type\":\"string\"}},\"required\":[\"message\",\"type\"],\"type\":\"object\"},\"message\":{\"type\":\"string\"},\"request_id\":{\"type\":\"string\"},\"success\":{\"const\":false}},\"required\":[\"request_id\",\"success\",\"message\",\"data\",\"error\"],\"type\":\"object\"},\"SynthesisResponse\":{\"properties\":{\"audio_content\":{\"type\":\"string\"},\"audio_duration\":{\"type\":\"number\"},\"audio_url\":{\"type\":\"string\"},\"billing\":{\"properties\":{\"charged\":{\"type\":\"string\"},\"quantity\":{\"type\":\"number\"},\"unit\":{\"type\":\"string\"}},\"type\":\"object\"},\"expires_at\":{\"type\":\"string\"},\"raw_response\":{\"type\":\"object\"},\"request_id\":{\"pattern\":\"^res_[0-9a-f]{24}$\",\"type\":\"string\"},\"resemble_url\":{\"type\":\"string\"},\"voice_uuid\":{\"type\":\"string\"}},\"required\":[\"request_id\",\"audio_url\",\"billing\"],\"type\":\"object\"},\"UploadResponse\":{\"properties\":{\"asset_class\":{\"type\":\"string\"},\"asset_id\":{\"type\":\"integer\"},\"expires_at\":{\"type\":[\"string\",\"null\"]},\"expires_in\":{\"type\":\"integer\"},\"extension\":{\"type\":\"string\"},\"file_name\":{\"type\":\"string\"},\"file_type\":{\"type\":\"string\"},\"purpose\":{\"type\":\"string\"},\"size_bytes\":{\"type\":\"integer\"},\"url\":{\"type\":\"string\"}},\"required\":[\"url\",\"asset_id\",\"expires_in\"],\"type\":\"object\"}},\"securitySchemes\":{\"accessToken\":{\"bearerFormat\":\"JWT\",\"description\":\"An access token (JWT) from /auth/login\",\"scheme\":\"bearer\",\"type\":\"http\"},\"adminKey\":{\"description\":\"The operator's admin key (GATEWAY_ADMIN_KEY)\",\"in\":\"header\",\"name\":\"X-Admin-Key\",\"type\":\"apiKey\"},\"bearerAuth\":{\"description\":\"An API key, or an access token (JWT) from /auth/login\",\"scheme\":\"bearer\",\"type\":\"http\"},\"googApiKey\":{\"description\":\"An API key, as Google's clients send it\",\"in\":\"header\",\"name\":\"x-goog-api-key\",\"type\":\"apiKey\"},\"webhookSignature\":{\"description\":\"`sha256=<hex>`: HMAC-SHA256 of the raw body with the webhook secret\",\"in\":\"header\",\"name\":\"X-Provider-Signature\",\"type\":\"apiKey\"},\"xApiKey\":{\"description\":\"An API key, as Anthropic's clients send it\",\"in\":\"header\",\"name\":\"x-api-key\",\"type\":\"apiKey\"}}},\"info\":{\"description\":\"Generated from endpoints.toml: one operation per row of the route table.\",\"title\":\"AI-API gateway\",\"version\":\"1\"},\"openapi\":\"3.1.0\",\"paths\":{\"/api/v1/voice/agents/capabilities\":{\"get\":{\"operationId\":\"agents.capabilities\",\"responses\":{\"2XX\":{\"content\":{\"application/json\":{\"schema\":{}}},\"description\":\"Success\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"4XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"},\"5XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"}},\"security\":[{\"bearerAuth\":[]}],\"tags\":[\"voice\"],\"x-gateway\":{\"billing\":\"free\",\"capability\":\"agents\",\"mode\":\"proxy\"}}},\"/api/v1/voice/agents/{uuid}\":{\"delete\":{\"operationId\":\"agents.delete\",\"parameters\":[{\"in\":\"path\",\"name\":\"uuid\",\"required\":true,\"schema\":{\"minLength\":1,\"type\":\"string\"}}],\"responses\":{\"2XX\":{\"content\":{\"application/json\":{\"schema\":{}}},\"description\":\"Success\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"4XX\":{\"$ref\":\"#/components/responses/ErrorFormat1\"},\"5XX\":{\"$ref\":\"#/components/responses/ErrorFormat1\"}},\"security\":[{\"bearerAuth\":[]}],\"tags\":[\"voice\"],\"x-gateway\":{\"billing\":\"voice_subscription\",\"capability\":\"agents\",\"gate\":\"business_plan\",\"mode\":\"proxy\"}},\"get\":{\"operationId\":\"agents.get\",\"parameters\":[{\"in\":\"path\",\"name\":\"uuid\",\"required\":true,\"schema\":{\"minLength\":1,\"type\":\"string\"}},{\"in\":\"query\",\"name\":\"owner\",\"required\":true,\"schema\":{\"type\":\"string\"}}],\"responses\":{\"2XX\":{\"content\":{\"application/json\":{\"schema\":{}}},\"description\":\"Success\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"4XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"},\"5XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"}},\"security\":[{\"bearerAuth\":[]}],\"summary\":\"One agent\",\"tags\":[\"voice\"],\"x-gateway\":{\"billing\":\"free\",\"capability\":\"agents\",\"mode\":\"proxy\"}}},\"/api/v1/voice/stt\":{\"post\":{\"operationId\":\"stt.submit\",\"requestBody\":{\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}},\"required\":false},\"responses\":{\"2XX\":{\"content\":{\"application/json\":{\"schema\":{}}},\"description\":\"Success\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"4XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"},\"5XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"}},\"security\":[{\"bearerAuth\":[]}],\"tags\":[\"voice\"],\"x-gateway\":{\"billing\":\"audio_seconds\",\"capability\":\"stt\",\"mode\":\"job_submit\"}}},\"/api/v1/voice/stt/{uuid}\":{\"get\":{\"operationId\":\"stt.get\",\"parameters\":[{\"in\":\"path\",\"name\":\"uuid\",\"required\":true,\"schema\":{\"minLength\":1,\"type\":\"string\"}}],\"responses\":{\"2XX\":{\"content\":{\"application/json\":{\"schema\":{}}},\"description\":\"Success\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"4XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"},\"5XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"}},\"security\":[{\"bearerAuth\":[]}],\"tags\":[\"voice\"],\"x-gateway\":{\"billing\":\"free\",\"capability\":\"stt\",\"mode\":\"job_get\"}}},\"/api/v1/voice/tts/synthesize\":{\"post\":{\"operationId\":\"tts.synthesize\",\"requestBody\":{\"content\":{\"application/json\":{\"schema\":{\"properties\":{\"output_format\":{\"enum\":[\"mp3\",\"wav\"],\"type\":\"string\"},\"pitch\":{\"maximum\":2.0,\"minimum\":-2.0,\"type\":\"number\"},\"text\":{\"maxLength\":10000,\"type\":\"string\"}},\"required\":[\"text\"],\"type\":\"object\"}}},\"required\":true},\"responses\":{\"2XX\":{\"content\":{\"application/json\":{\"schema\":{\"$ref\":\"#/components/schemas/SynthesisResponse\"}}},\"description\":\"Success\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"4XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"},\"5XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"}},\"security\":[{\"bearerAuth\":[]}],\"summary\":\"Synthesize speech from text\",\"tags\":[\"voice\"],\"x-gateway\":{\"billing\":\"audio_seconds\",\"capability\":\"tts\",\"mode\":\"synthesize\"}}},\"/api/v1/voice/webhooks/provider\":{\"post\":{\"operationId\":\"webhooks.provider\",\"requestBody\":{\"content\":{\"application/json\":{\"schema\":{\"type\":\"object\"}}},\"required\":false},\"responses\":{\"2XX\":{\"content\":{\"application/json\":{\"schema\":{}}},\"description\":\"Success\",\"headers\":{\"X-Request-Id\":{\"$ref\":\"#/components/headers/X-Request-Id\"}}},\"4XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"},\"5XX\":{\"$ref\":\"#/components/responses/ErrorDetail\"}},\"security\":[{\"webhookSignature\":[]}],\"tags\":[\"voice\"],\"x-gateway\":{\"billing\":\"free\",\"capability\":\"webhook\",\"mode\":\"webhook\"}}}},\"tags\":[{\"description\":\"Voice-audio API (errors: {\\\"detail\\\"})\",\"name\":\"voice\"},{\"description\":\"General AI gateway\",\"name\":\"gateway\"}]}";
/// The `/docs` page: HTML rendered from [`OPENAPI_JSON`]'s document.
pub static DOCS_HTML: &str = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>AI-API gateway</title><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>body{font-family:system-ui,sans-serif;max-width:70em;margin:auto;padding:1em;color:#222}code{font-family:ui-monospace,monospace}.m{font-weight:bold;display:inline-block;min-width:4.5em}section{border-top:1px solid #ccc;padding:.5em 0}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left}caption{text-align:left;font-weight:bold}.facts{color:#555;font-size:.9em}ul{list-style:none;padding:0}</style></head><body><h1>AI-API gateway</h1><p>7 operations. The machine-readable document is <a href=\"/openapi.json\">/openapi.json</a>.</p><nav><ul id=\"routes\"><li class=\"route\"><a href=\"#agents.capabilities\"><span class=\"m\">GET</span> <code>/api/v1/voice/agents/capabilities</code></a> </li><li class=\"route\"><a href=\"#agents.delete\"><span class=\"m\">DELETE</span> <code>/api/v1/voice/agents/{uuid}</code></a> </li><li class=\"route\"><a href=\"#agents.get\"><span class=\"m\">GET</span> <code>/api/v1/voice/agents/{uuid}</code></a> One agent</li><li class=\"route\"><a href=\"#stt.submit\"><span class=\"m\">POST</span> <code>/api/v1/voice/stt</code></a> </li><li class=\"route\"><a href=\"#stt.get\"><span class=\"m\">GET</span> <code>/api/v1/voice/stt/{uuid}</code></a> </li><li class=\"route\"><a href=\"#tts.synthesize\"><span class=\"m\">POST</span> <code>/api/v1/voice/tts/synthesize</code></a> Synthesize speech from text</li><li class=\"route\"><a href=\"#webhooks.provider\"><span class=\"m\">POST</span> <code>/api/v1/voice/webhooks/provider</code></a> </li></ul></nav><section id=\"agents.capabilities\"><h2><span class=\"m\">GET</span> <code>/api/v1/voice/agents/capabilities</code></h2><p></p><p class=\"facts\">id <code>agents.capabilities</code> · auth bearerAuth · mode proxy · billing free · rate limit <code>agents</code></p><p class=\"facts\">success: any · errors: ErrorDetail</p></section><section id=\"agents.delete\"><h2><span class=\"m\">DELETE</span> <code>/api/v1/voice/agents/{uuid}</code></h2><p></p><p class=\"facts\">id <code>agents.delete</code> · auth bearerAuth · mode proxy · billing voice_subscription · rate limit <code>agents</code></p><table><caption>Parameters</caption><tr><th>name</th><th>required</th><th>schema</th></tr><tr><td><code>uuid (path)</code></td><td>yes</td><td>string</td></tr></table><p class=\"facts\">success: any · errors: ErrorFormat1</p></section><section id=\"agents.get\"><h2><span class=\"m\">GET</span> <code>/api/v1/voice/agents/{uuid}</code></h2><p>One agent</p><p class=\"facts\">id <code>agents.get</code> · auth bearerAuth · mode proxy · billing free · rate limit <code>agents</code></p><table><caption>Parameters</caption><tr><th>name</th><th>required</th><th>schema</th></tr><tr><td><code>uuid (path)</code></td><td>yes</td><td>string</td></tr><tr><td><code>owner (query)</code></td><td>yes</td><td>string</td></tr></table><p class=\"facts\">success: any · errors: ErrorDetail</p></section><section id=\"stt.submit\"><h2><span class=\"m\">POST</span> <code>/api/v1/voice/stt</code></h2><p></p><p class=\"facts\">id <code>stt.submit</code> · auth bearerAuth · mode job_submit · billing audio_seconds · rate limit <code>stt</code></p><p>Body: <code>application/json</code>, any object.</p><p class=\"facts\">success: any · errors: ErrorDetail</p></section><section id=\"stt.get\"><h2><span class=\"m\">GET</span> <code>/api/v1/voice/stt/{uuid}</code></h2><p></p><p class=\"facts\">id <code>stt.get</code> · auth bearerAuth · mode job_get · billing free · rate limit <code>stt</code></p><table><caption>Parameters</caption><tr><th>name</th><th>required</th><th>schema</th></tr><tr><td><code>uuid (path)</code></td><td>yes</td><td>string</td></tr></table><p class=\"facts\">success: any · errors: ErrorDetail</p></section><section id=\"tts.synthesize\"><h2><span class=\"m\">POST</span> <code>/api/v1/voice/tts/synthesize</code></h2><p>Synthesize speech from text</p><p class=\"facts\">id <code>tts.synthesize</code> · auth bearerAuth · mode synthesize · billing audio_seconds · rate limit <code>tts</code></p><table><caption>Body (application/json)</caption><tr><th>name</th><th>required</th><th>schema</th></tr><tr><td><code>output_format</code></td><td>no</td><td>string, one of: mp3, wav</td></tr><tr><td><code>pitch</code></td><td>no</td><td>number, ≥ -2.0, ≤ 2.0</td></tr><tr><td><code>text</code></td><td>yes</td><td>string, at most 10000 characters</td></tr></table><p class=\"facts\">success: SynthesisResponse · errors: ErrorDetail</p></section><section id=\"webhooks.provider\"><h2><span class=\"m\">POST</span> <code>/api/v1/voice/webhooks/provider</code></h2><p></p><p class=\"facts\">id <code>webhooks.provider</code> · auth webhookSignature · mode webhook · billing free · rate limit <code>webhook</code></p><p>Body: <code>application/json</code>, any object.</p><p class=\"facts\">success: any · errors: ErrorDetail</p></section></body></html>\n";
/// `[capabilities]`: every rate-limit bucket with its default quota, in table order.
pub static CAPABILITIES: &[::runtime::__private::Capability] = &[
    ::runtime::__private::Capability {
        name: "tts",
        quota: ::core::option::Option::Some(::runtime::__private::QuotaSpec {
            count: 60,
            per_secs: 60,
        }),
    },
    ::runtime::__private::Capability {
        name: "agents",
        quota: ::core::option::Option::Some(::runtime::__private::QuotaSpec {
            count: 120,
            per_secs: 60,
        }),
    },
    ::runtime::__private::Capability {
        name: "stt",
        quota: ::core::option::Option::Some(::runtime::__private::QuotaSpec {
            count: 30,
            per_secs: 60,
        }),
    },
    ::runtime::__private::Capability {
        name: "webhook",
        quota: ::core::option::Option::None,
    },
];
/// One entry per job kind, in order of first appearance in the table.
pub static JOB_KINDS: &[::runtime::__private::JobKind] = &[
    ::runtime::__private::JobKind {
        kind: "stt",
        submit: &STT_SUBMIT,
        get: ::core::option::Option::Some(&STT_GET),
        mirror: ::core::option::Option::Some("item.result_url"),
        ceiling: ::core::option::Option::Some(3600),
    },
];
/// `[bases.*]`: how the provider key is presented to each base, in table order.
pub static BASES: &[::runtime::__private::BaseSpec] = &[
    ::runtime::__private::BaseSpec {
        base: ::runtime::__private::Base::Main,
        auth: ::runtime::__private::UpstreamAuth::Bearer,
    },
    ::runtime::__private::BaseSpec {
        base: ::runtime::__private::Base::Synth,
        auth: ::runtime::__private::UpstreamAuth::AccessToken,
    },
];
/// The whole table: [`ROUTES`], [`CAPABILITIES`], [`JOB_KINDS`] and [`BASES`].
pub static TABLE: ::runtime::__private::Table = ::runtime::__private::Table {
    routes: ROUTES,
    capabilities: CAPABILITIES,
    job_kinds: JOB_KINDS,
    bases: BASES,
    openapi: OPENAPI_JSON,
    docs: DOCS_HTML,
    areas: &[
        ::runtime::__private::AreaSpec {
            area: ::runtime::__private::Area::Voice,
            prefix: "/api/v1/voice",
            errors: ::runtime::__private::ErrorFormat::Detail,
        },
    ],
    unmatched_errors: ::runtime::__private::ErrorFormat::Detail,
    kinds: &[],
    limits: &[],
    purposes: &[],
    prices: &[],
    upstream_products: &[],
    unit_products: &[],
};
fn handle_tts_synthesize(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::runtime::__private::handle(&TTS_SYNTHESIZE, gw, req, params)
}
fn handle_agents_capabilities(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::runtime::__private::handle(&AGENTS_CAPABILITIES, gw, req, params)
}
fn handle_agents_get(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::runtime::__private::handle(&AGENTS_GET, gw, req, params)
}
fn handle_agents_delete(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::runtime::__private::handle(&AGENTS_DELETE, gw, req, params)
}
fn handle_stt_submit(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::runtime::__private::handle(&STT_SUBMIT, gw, req, params)
}
fn handle_stt_get(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::runtime::__private::handle(&STT_GET, gw, req, params)
}
fn handle_webhooks_provider(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::runtime::__private::handle(&WEBHOOKS_PROVIDER, gw, req, params)
}
/// Finds the row for a request: `path` is the URI's path (no query
/// string), still percent-encoded. One trailing `/` is ignored; an
/// empty segment never matches. The most specific path shape wins
/// (static segments before parameters, parameters before a tail
/// `{name*}`, leftmost first; a tail takes one segment or more, its
/// value the segments joined by `/`), then the
/// method is matched: a method that shape lacks is a 405, never a
/// fall-back to a less specific shape. Allocates nothing but the
/// captured parameters.
pub fn route(
    method: &::runtime::__private::HttpMethod,
    path: &str,
) -> ::runtime::__private::RouteMatch {
    const MAX_SEGMENTS: usize = 5;
    let ::core::option::Option::Some(rest) = path.strip_prefix('/') else {
        return ::runtime::__private::RouteMatch::NotFound;
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut segs: [&str; MAX_SEGMENTS] = [""; MAX_SEGMENTS];
    let mut n = 0usize;
    if !rest.is_empty() {
        for seg in rest.split('/') {
            if seg.is_empty() || n == MAX_SEGMENTS {
                return ::runtime::__private::RouteMatch::NotFound;
            }
            segs[n] = seg;
            n += 1;
        }
    }
    let _ = method;
    match &segs[..n] {
        ["api", "v1", "voice", "agents", "capabilities"] => {
            match *method {
                ::runtime::__private::HttpMethod::GET => {
                    ::runtime::__private::RouteMatch::Found {
                        spec: &AGENTS_CAPABILITIES,
                        handler: handle_agents_capabilities,
                        params: ::runtime::__private::PathParams::new(),
                    }
                }
                _ => {
                    ::runtime::__private::RouteMatch::MethodNotAllowed {
                        allowed: "GET",
                    }
                }
            }
        }
        ["api", "v1", "voice", "agents", p0] => {
            match *method {
                ::runtime::__private::HttpMethod::GET => {
                    ::runtime::__private::RouteMatch::Found {
                        spec: &AGENTS_GET,
                        handler: handle_agents_get,
                        params: {
                            let mut params = ::runtime::__private::PathParams::new();
                            params.push("uuid", p0);
                            params
                        },
                    }
                }
                ::runtime::__private::HttpMethod::DELETE => {
                    ::runtime::__private::RouteMatch::Found {
                        spec: &AGENTS_DELETE,
                        handler: handle_agents_delete,
                        params: {
                            let mut params = ::runtime::__private::PathParams::new();
                            params.push("uuid", p0);
                            params
                        },
                    }
                }
                _ => {
                    ::runtime::__private::RouteMatch::MethodNotAllowed {
                        allowed: "GET, DELETE",
                    }
                }
            }
        }
        ["api", "v1", "voice", "stt"] => {
            match *method {
                ::runtime::__private::HttpMethod::POST => {
                    ::runtime::__private::RouteMatch::Found {
                        spec: &STT_SUBMIT,
                        handler: handle_stt_submit,
                        params: ::runtime::__private::PathParams::new(),
                    }
                }
                _ => {
                    ::runtime::__private::RouteMatch::MethodNotAllowed {
                        allowed: "POST",
                    }
                }
            }
        }
        ["api", "v1", "voice", "stt", p0] => {
            match *method {
                ::runtime::__private::HttpMethod::GET => {
                    ::runtime::__private::RouteMatch::Found {
                        spec: &STT_GET,
                        handler: handle_stt_get,
                        params: {
                            let mut params = ::runtime::__private::PathParams::new();
                            params.push("uuid", p0);
                            params
                        },
                    }
                }
                _ => {
                    ::runtime::__private::RouteMatch::MethodNotAllowed {
                        allowed: "GET",
                    }
                }
            }
        }
        ["api", "v1", "voice", "tts", "synthesize"] => {
            match *method {
                ::runtime::__private::HttpMethod::POST => {
                    ::runtime::__private::RouteMatch::Found {
                        spec: &TTS_SYNTHESIZE,
                        handler: handle_tts_synthesize,
                        params: ::runtime::__private::PathParams::new(),
                    }
                }
                _ => {
                    ::runtime::__private::RouteMatch::MethodNotAllowed {
                        allowed: "POST",
                    }
                }
            }
        }
        ["api", "v1", "voice", "webhooks", "provider"] => {
            match *method {
                ::runtime::__private::HttpMethod::POST => {
                    ::runtime::__private::RouteMatch::Found {
                        spec: &WEBHOOKS_PROVIDER,
                        handler: handle_webhooks_provider,
                        params: ::runtime::__private::PathParams::new(),
                    }
                }
                _ => {
                    ::runtime::__private::RouteMatch::MethodNotAllowed {
                        allowed: "POST",
                    }
                }
            }
        }
        _ => ::runtime::__private::RouteMatch::NotFound,
    }
}
