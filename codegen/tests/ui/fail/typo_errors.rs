// A typo in a row's `errors` names the row, the key and the accepted formats
// (anthropic among them: Anthropic's error shape, for the /messages rows).
codegen::routes!(inline = r#"
[areas.gateway]
prefix = "/api/v1"
auth = "bearer"
errors = "envelope"

[capabilities]
chat = "10/m"

[[endpoint]]
id = "messages"
area = "gateway"
method = "POST"
path = "/messages"
mode = "messages"
capability = "chat"
billing = "tokens"
auth = "x_api_key"
errors = "antropic"
"#);

fn main() {}
