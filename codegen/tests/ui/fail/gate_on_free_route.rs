// A gate only makes sense on a billed route.
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
id = "voices.list"
area = "voice"
method = "GET"
path = "/voices"
mode = "proxy"
capability = "voices"
billing = "free"
gate = "business_plan"
upstream = { base = "main", method = "GET", path = "/voices" }
"#);

fn main() {}
