// The upstream path needs {voice_uuid}, which the route does not capture.
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
id = "voices.build"
area = "voice"
method = "POST"
path = "/voices/build"
mode = "proxy"
capability = "voices"
billing = "free"
upstream = { base = "main", method = "POST", path = "/voices/{voice_uuid}/build" }
"#);

fn main() {}
