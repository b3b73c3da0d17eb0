//! Integration tests: a real gateway and a real provider simulator on
//! 127.0.0.1:0, driven over HTTP, with a real SQLite file per test.
//!
//! One binary (modules below) so that it links once. Helpers live in
//! [`harness`]; each module covers one behaviour of the spec.

mod harness;

mod absent;
mod accounts;
mod adapter_anthropic;
mod adapter_gemini;
mod adapter_openai;
mod audit;
mod auth;
mod budgets;
mod budgets_edit;
mod budgets_voice;
mod cache;
mod cli;
mod clients;
mod crash_holds;
mod dashboard;
mod database;
mod database_restart;
mod dialects;
mod docs;
mod edges;
mod errors;
mod faults_under_load;
mod follower;
mod format1_errors;
mod forwarding;
mod gate;
mod gateway;
mod gemini_door;
mod hardening;
mod integrity;
mod isolation;
mod layout;
mod media;
mod media_files;
mod messages;
mod messages_native;
mod mirror;
mod money;
mod oauth;
mod observe;
mod openai_client;
mod packs;
mod probe_accounts;
mod ratelimit;
mod reconcile;
mod responses;
mod responses_background;
mod retention;
mod routes;
mod routing;
mod scaleout;
mod scaleout_storage;
mod speech_transcription;
mod speech_vendors;
mod stripe;
mod synthesis;
mod tls;
mod traces;
mod trust_accounts;
mod trust_bounds;
mod trust_media;
mod trust_routing;
mod trust_streams;
mod trust_voice_budgets;
mod urlpolicy;
mod usage_history;
mod validation;
mod video_jobs;
mod webhook;
