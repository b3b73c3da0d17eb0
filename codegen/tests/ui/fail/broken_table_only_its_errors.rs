// A broken table: the only errors are the table's own. The macro also
// emits the empty names the routes module has (`ROUTES`, `TABLE`,
// `route`, ...), so code using them, like `server`, adds none.
mod routes {
    codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[capabilities]
voices = "10/m"

[[endpoint]]
id = "voices.list"
area = "voice"
method = "GET"
path = "/voices"
mode = "prox"
capability = "voices"
billing = "free"
"#);
}

fn main() {
    let _: usize = routes::ROUTE_COUNT;
    let _ = routes::ROUTES.len();
    let _ = routes::TABLE.routes.len() + routes::TABLE.capabilities.len();
    let _ = routes::OPENAPI_JSON.len() + routes::DOCS_HTML.len();
    let _ = routes::route(&runtime::__private::HttpMethod::GET, "/api/v1/voice/voices");
}
