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
};
fn handle_tts_synthesize(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::std::boxed::Box::pin(
        ::runtime::__private::handle(&TTS_SYNTHESIZE, gw, req, params),
    )
}
fn handle_agents_capabilities(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::std::boxed::Box::pin(
        ::runtime::__private::handle(&AGENTS_CAPABILITIES, gw, req, params),
    )
}
fn handle_agents_get(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::std::boxed::Box::pin(::runtime::__private::handle(&AGENTS_GET, gw, req, params))
}
fn handle_agents_delete(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::std::boxed::Box::pin(::runtime::__private::handle(&AGENTS_DELETE, gw, req, params))
}
fn handle_stt_submit(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::std::boxed::Box::pin(::runtime::__private::handle(&STT_SUBMIT, gw, req, params))
}
fn handle_stt_get(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::std::boxed::Box::pin(::runtime::__private::handle(&STT_GET, gw, req, params))
}
fn handle_webhooks_provider(
    gw: ::runtime::__private::Gateway,
    req: ::runtime::__private::Request,
    params: ::runtime::__private::PathParams,
) -> ::runtime::__private::HandlerFuture {
    ::std::boxed::Box::pin(
        ::runtime::__private::handle(&WEBHOOKS_PROVIDER, gw, req, params),
    )
}
/// Finds the row for a request: `path` is the URI's path (no query
/// string), still percent-encoded. One trailing `/` is ignored; an
/// empty segment never matches. The most specific path shape wins
/// (static segments before parameters, leftmost first), then the
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
