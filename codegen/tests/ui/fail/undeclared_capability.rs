// A row's capability must be declared in `[capabilities]` (with a
// suggestion), and every declared capability must be used by a row.
codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[bases.main]
auth = "bearer"

[capabilities]
voices = "10/m"
spare = "1/x"
unused = "off"

[[endpoint]]
id = "voices.get"
area = "voice"
method = "GET"
path = "/voices/{voice_uuid}"
mode = "proxy"
capability = "voice"
billing = "free"
upstream = { base = "main", method = "GET", path = "/voices/{voice_uuid}" }
"#);

fn main() {}
