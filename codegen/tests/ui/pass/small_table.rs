// A valid table expands, compiles and routes (against the stand-in runtime).
mod routes {
    codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[bases.main]
auth = "bearer"

[capabilities]
voices = "10/m"

[[endpoint]]
id = "voices.get"
area = "voice"
method = "GET"
path = "/voices/{voice_uuid}"
mode = "proxy"
capability = "voices"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{voice_uuid}" }
"#);
}

use runtime::__private::{HttpMethod, RouteMatch};

fn main() {
    assert_eq!(routes::ROUTE_COUNT, 1);
    assert_eq!(routes::VOICES_GET.path, "/api/v1/voice/voices/{voice_uuid}");
    match routes::route(&HttpMethod::GET, "/api/v1/voice/voices/abc") {
        RouteMatch::Found { spec, params, .. } => {
            assert_eq!(spec.id, "voices.get");
            assert_eq!(params.get("voice_uuid").as_deref(), Some("abc"));
        }
        _ => panic!("not found"),
    }
}
