//! The gateway driven by an independent, widely used OpenAI client
//! library (`async-openai`), unchanged but for its base URL and key:
//! model list, chat, streaming chat, embeddings, images; and chat,
//! streaming chat and tools against an `anthropic` and a `gemini` model.

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestUserMessage, ChatCompletionStreamOptions, ChatCompletionTool,
    ChatCompletionTools, CreateChatCompletionRequestArgs, FinishReason, FunctionObject,
};
use async_openai::types::embeddings::CreateEmbeddingRequestArgs;
use async_openai::types::images::{CreateImageRequestArgs, Image, ImageModel, ImageSize};
use async_openai::Client;
use futures_util::StreamExt;

use crate::harness::{assert_charge_is_four_counts, llm_env, native_env};

#[tokio::test]
async fn the_async_openai_client_works_unchanged_but_for_base_url_and_key() {
    let env = llm_env(|_| {}).await;
    env.grant("1");
    let client = Client::with_config(
        OpenAIConfig::new()
            .with_api_base(env.url("/api/v1"))
            .with_api_key(env.key.clone()),
    );

    let models = client.models().list().await.unwrap();
    assert!(models
        .data
        .iter()
        .any(|m| m.id == "sim/sim-gpt" && m.owned_by == "sim"));

    let request = CreateChatCompletionRequestArgs::default()
        .model("sim/sim-gpt")
        .max_tokens(5u32)
        .messages([ChatCompletionRequestUserMessage::from("Hello there").into()])
        .build()
        .unwrap();
    let answer = client.chat().create(request.clone()).await.unwrap();
    let text = answer.choices[0].message.content.clone().unwrap();
    assert!(text.contains("simulated"), "{text}");
    assert_eq!(answer.usage.unwrap().completion_tokens, 5);

    let mut stream = client.chat().create_stream(request).await.unwrap();
    let mut streamed = String::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        for c in chunk.choices {
            streamed.push_str(c.delta.content.as_deref().unwrap_or(""));
        }
    }
    assert_eq!(streamed, text);

    let e = client
        .embeddings()
        .create(
            CreateEmbeddingRequestArgs::default()
                .model("sim/sim-embed")
                .input(["hello", "world"])
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(e.data.len(), 2);
    assert_eq!(e.data[0].embedding.len(), 16);

    let images = client
        .images()
        .generate(
            CreateImageRequestArgs::default()
                .prompt("a cat")
                .model(ImageModel::Other("sim/sim-image".into()))
                .size(ImageSize::S256x256)
                .n(1u8)
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    match images.data[0].as_ref() {
        Image::Url { url, .. } => {
            assert!(url.starts_with(&env.gw.url()), "{url}");
            let r = env.client.get(url).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 200);
        }
        other => panic!("expected a URL, got {other:?}"),
    }
    // Four model calls recorded (the stream's when it ended).
    assert_eq!(env.wait_model_usage(4).await.len(), 4);
}

#[tokio::test]
async fn the_async_openai_client_chats_with_anthropic_and_gemini_models_unchanged() {
    let env = native_env().await;
    env.grant("1");
    let client = Client::with_config(
        OpenAIConfig::new()
            .with_api_base(env.url("/api/v1"))
            .with_api_key(env.key.clone()),
    );
    let mut row = 0;
    for model in ["claude/claude-sim", "gem/gemini-sim"] {
        let request = CreateChatCompletionRequestArgs::default()
            .model(model)
            .max_tokens(5u32)
            .messages([ChatCompletionRequestUserMessage::from("Hello there").into()])
            .build()
            .unwrap();
        let answer = client.chat().create(request.clone()).await.unwrap();
        let text = answer.choices[0].message.content.clone().unwrap();
        assert!(text.contains("simulated"), "{model}: {text}");
        assert_eq!(answer.choices[0].finish_reason, Some(FinishReason::Length));
        assert_eq!(answer.usage.unwrap().completion_tokens, 5);
        assert_charge_is_four_counts(&env, row).await;
        row += 1;

        let mut streaming = request.clone();
        streaming.stream_options = Some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        });
        let mut stream = client.chat().create_stream(streaming).await.unwrap();
        let mut streamed = String::new();
        let mut usage = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.unwrap();
            for c in chunk.choices {
                streamed.push_str(c.delta.content.as_deref().unwrap_or(""));
            }
            usage = chunk.usage.or(usage);
        }
        assert_eq!(streamed, text, "{model}");
        assert_eq!(usage.unwrap().completion_tokens, 5, "{model}");
        assert_charge_is_four_counts(&env, row).await;
        row += 1;

        let tool = ChatCompletionTools::Function(ChatCompletionTool {
            function: FunctionObject {
                name: "get_weather".into(),
                description: Some("The weather of a city".into()),
                parameters: Some(serde_json::json!({"type": "object",
                    "properties": {"city": {"type": "string"}}, "required": ["city"]})),
                strict: None,
            },
        });
        let request = CreateChatCompletionRequestArgs::default()
            .model(model)
            .messages([ChatCompletionRequestUserMessage::from("What does get_weather say?").into()])
            .tools(vec![tool])
            .build()
            .unwrap();
        let answer = client.chat().create(request).await.unwrap();
        assert_eq!(
            answer.choices[0].finish_reason,
            Some(FinishReason::ToolCalls)
        );
        let calls = answer.choices[0].message.tool_calls.clone().unwrap();
        assert_eq!(calls.len(), 1, "{model}");
        row += 1;
    }
    assert_eq!(env.wait_model_usage(row).await.len(), row);
}
