// Every problem is reported, in table order, not only the first; a bad row
// does not hide the next one.
codegen::routes!(inline = r#"
[areas.voice]
prefix = "/api/v1/voice"
auth = "bearer"
errors = "detail"

[bases.main]
auth = "bearer"

[capabilities]
one = "1/m"

[[endpoint]]
id = "one"
area = "voice"
method = "FETCH"
path = "/one"
mode = "proxy"
capability = "one"
billing = "free"
retention_day = 7
upstream = { base = "main", method = "GET", path = "/one" }

[[endpoint]]
id = "two"
area = "voice"
method = "GET"
path = "/two/{a}{b}"
mode = "job_get"
capability = ""
billing = "free"
upstream = { base = "main", method = "GET", path = "/two" }
"#);

fn main() {}
