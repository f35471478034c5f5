//! The LangGraph Agent Server API subset, served at the root so `langgraph-sdk` and
//! agent-chat-ui work unchanged against Chronicle.

pub mod views;
