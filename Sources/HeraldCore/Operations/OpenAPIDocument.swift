/// The OpenAPI 3.1 document served at GET /openapi.json (checked against the live server by schemathesis in `make test`).
enum OpenAPIDocument {
    static let json = #"""
    {
      "openapi": "3.1.0",
      "info": {
        "title": "Herald",
        "version": "0.1.0",
        "summary": "Notification routing for threaded chat.",
        "description": "Herald ingests chat events, keeps thread subscriptions, applies notification preferences, produces push jobs and answers thread inboxes. Errors are `{\"error\": {\"code\", \"message\", \"params\"?}}`; times are epoch milliseconds.\n\nAuthentication: `Authorization: Bearer <token>`. The admin token manages apps and keys and may act in any app by naming it in `X-App-Id`. App keys (`hk_…`) belong to one app and have one role: `ingest` (POST /v1/events), `worker` (the jobs API), `server` (every app route, the jobs API included). Checks run in this order: route (404, 405), token (401), role and app (403; 400/404 for the admin's `X-App-Id`), body (413, 415), then the handler."
      },
      "servers": [{"url": "/"}],
      "security": [{"bearerAuth": []}],
      "tags": [
        {"name": "Operations", "description": "Health, readiness, metrics, this document, whoami."},
        {"name": "Admin", "description": "Apps and keys (admin token)."},
        {"name": "Ingest", "description": "CloudEvents from the message bus."},
        {"name": "Subscriptions", "description": "Thread subscriptions."},
        {"name": "Membership", "description": "Group membership snapshots."},
        {"name": "Inbox", "description": "A user's thread inbox and read marks."},
        {"name": "Preferences", "description": "App settings, user preferences and mutes."},
        {"name": "Routing", "description": "Why a push was or was not sent."},
        {"name": "Jobs", "description": "Push fan-out jobs for push senders."}
      ],
      "paths": {
        "/healthz": {
          "get": {
            "tags": ["Operations"],
            "summary": "Liveness",
            "operationId": "healthz",
            "security": [],
            "description": "200 while the process runs. No token.",
            "responses": {
              "200": {
                "description": "Alive.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Health"}}}
              }
            }
          }
        },
        "/readyz": {
          "get": {
            "tags": ["Operations"],
            "summary": "Readiness",
            "operationId": "readyz",
            "security": [],
            "description": "200 when the database answers and its schema is the one this binary expects; else 503 (`params.check` is `database` or `schema`). No token.",
            "responses": {
              "200": {
                "description": "Ready.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Readiness"}}}
              },
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/metrics": {
          "get": {
            "tags": ["Operations"],
            "summary": "Prometheus metrics",
            "operationId": "metrics",
            "security": [],
            "description": "Prometheus text exposition format 0.0.4: requests by route and status, latency histograms, events by status, jobs, queue depth. No token.",
            "responses": {
              "200": {"description": "Metrics.", "content": {"text/plain; version=0.0.4": {"schema": {"type": "string"}}}}
            }
          }
        },
        "/openapi.json": {
          "get": {
            "tags": ["Operations"],
            "summary": "This document",
            "operationId": "openapi",
            "security": [],
            "description": "The OpenAPI 3.1 description of every route. No token.",
            "responses": {
              "200": {"description": "The OpenAPI document.", "content": {"application/json": {"schema": {"type": "object"}}}}
            }
          }
        },
        "/v1/whoami": {
          "get": {
            "tags": ["Operations"],
            "summary": "Which app and role the token acts as",
            "operationId": "whoami",
            "description": "For checking a key without side effects.\n\nAllowed: any app key (`ingest`, `worker`, `server`), or the admin token naming the app in `X-App-Id`.",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "responses": {
              "200": {
                "description": "The caller.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/WhoAmI"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/apps": {
          "post": {
            "tags": ["Admin"],
            "summary": "Create an app",
            "operationId": "createApp",
            "description": "Allowed: the admin token only (`HERALD_ADMIN_TOKEN`); an app key gets 403.",
            "requestBody": {
              "required": true,
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {
                      "id": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 128,
                        "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$",
                        "description": "The new app's id. An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'."
                      }
                    }
                  }
                }
              }
            },
            "responses": {
              "201": {
                "description": "Created.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/App"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "409": {"$ref": "\u0023/components/responses/Conflict"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "get": {
            "tags": ["Admin"],
            "summary": "List apps",
            "operationId": "listApps",
            "description": "Ordered by id.\n\nAllowed: the admin token only (`HERALD_ADMIN_TOKEN`); an app key gets 403.",
            "parameters": [{"$ref": "\u0023/components/parameters/Limit100"}, {"$ref": "\u0023/components/parameters/Cursor"}],
            "responses": {
              "200": {
                "description": "A page of apps.",
                "content": {
                  "application/json": {
                    "schema": {
                      "type": "object",
                      "description": "Apps",
                      "required": ["data", "meta"],
                      "properties": {
                        "data": {"type": "array", "items": {"$ref": "\u0023/components/schemas/App"}},
                        "meta": {"$ref": "\u0023/components/schemas/ListMeta"}
                      }
                    }
                  }
                }
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/apps/{app}/keys": {
          "post": {
            "tags": ["Admin"],
            "summary": "Create an app key",
            "operationId": "createKey",
            "description": "The secret is in the response only.\n\nAllowed: the admin token only (`HERALD_ADMIN_TOKEN`); an app key gets 403.",
            "parameters": [{"$ref": "\u0023/components/parameters/AppPath"}],
            "requestBody": {
              "required": true,
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": ["role"],
                    "properties": {
                      "role": {"$ref": "\u0023/components/schemas/Role"},
                      "label": {
                        "type": ["string", "null"],
                        "maxLength": 200,
                        "pattern": "^[^\\u0000]*$",
                        "description": "At most 200 characters (Unicode scalars), without U+0000."
                      }
                    }
                  }
                }
              }
            },
            "responses": {
              "201": {
                "description": "Created.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/CreatedKey"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "get": {
            "tags": ["Admin"],
            "summary": "List an app's keys",
            "operationId": "listKeys",
            "description": "Keys not revoked, oldest first; never secrets.\n\nAllowed: the admin token only (`HERALD_ADMIN_TOKEN`); an app key gets 403.",
            "parameters": [{"$ref": "\u0023/components/parameters/AppPath"}],
            "responses": {
              "200": {
                "description": "The keys.",
                "content": {
                  "application/json": {
                    "schema": {
                      "type": "object",
                      "required": ["data", "meta"],
                      "properties": {"data": {"type": "array", "items": {"$ref": "\u0023/components/schemas/KeyInfo"}},
                                     "meta": {"$ref": "\u0023/components/schemas/ListMeta"}}
                    }
                  }
                }
              },
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/apps/{app}/keys/{keyId}": {
          "delete": {
            "tags": ["Admin"],
            "summary": "Revoke a key",
            "operationId": "revokeKey",
            "description": "The key is refused from then on. Revoking twice is fine.\n\nAllowed: the admin token only (`HERALD_ADMIN_TOKEN`); an app key gets 403.",
            "parameters": [{"$ref": "\u0023/components/parameters/AppPath"}, {"$ref": "\u0023/components/parameters/KeyId"}],
            "responses": {
              "204": {"description": "Revoked."},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/events": {
          "post": {
            "tags": ["Ingest"],
            "summary": "Ingest CloudEvents",
            "operationId": "ingestEvents",
            "description": "CloudEvents 1.0 HTTP binding (SPEC §4):\n- structured mode: `Content-Type: application/cloudevents+json`, one event;\n- batched mode: `Content-Type: application/cloudevents-batch+json`, an array of at most 1000 events;\n- `Content-Type: application/json` with one event object or an array is read the same way;\n- binary mode: a `ce-specversion` header with a `Content-Type` other than `application/cloudevents…` (here `application/json`, or no body): the attributes come from the `ce-id`, `ce-source`, `ce-type`, `ce-time`, `ce-subject` headers and the body is the event's `data`.\n\nEach event is applied at most once per app by `(source, id)`. Invalid events are `rejected` in `results` (and listed by `GET /v1/events/rejected`) and the request still answers 200.\n\nAllowed: `ingest` and `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {
              "required": true,
              "content": {
                "application/cloudevents+json": {"schema": {"$ref": "\u0023/components/schemas/EventsBody"}},
                "application/cloudevents-batch+json": {"schema": {"$ref": "\u0023/components/schemas/EventsBody"}},
                "application/json": {"schema": {"$ref": "\u0023/components/schemas/EventsBody"}}
              }
            },
            "responses": {
              "200": {
                "description": "Per-event outcome.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/IngestResult"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/events/rejected": {
          "get": {
            "tags": ["Ingest"],
            "summary": "List rejected events",
            "operationId": "listRejectedEvents",
            "description": "Newest first.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Limit100"},
              {"$ref": "\u0023/components/parameters/CursorRejected"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "A page of rejected events.",
                "content": {
                  "application/json": {
                    "schema": {
                      "type": "object",
                      "description": "Rejected events",
                      "required": ["data", "meta"],
                      "properties": {
                        "data": {"type": "array", "items": {"$ref": "\u0023/components/schemas/RejectedEvent"}},
                        "meta": {"$ref": "\u0023/components/schemas/ListMeta"}
                      }
                    }
                  }
                }
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/threads/{messageId}/subscription": {
          "get": {
            "tags": ["Subscriptions"],
            "summary": "A user's subscription to a thread",
            "operationId": "getSubscription",
            "description": "With no row: `subscribed: false`, `since: null`. Unknown or deleted message: 404 `ERR_MESSAGE_ID_NOT_FOUND`; the user has no access: 403 `ERR_MESSAGE_NO_ACCESS`.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Uid"},
              {"$ref": "\u0023/components/parameters/MessageId"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "The state.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/SubscriptionState"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "put": {
            "tags": ["Subscriptions"],
            "summary": "Subscribe explicitly",
            "operationId": "subscribe",
            "description": "Idempotent; marks the thread read. The request body, if any, is ignored (but must be `application/json`).\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Uid"},
              {"$ref": "\u0023/components/parameters/MessageId"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "The state.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/SubscriptionState"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "delete": {
            "tags": ["Subscriptions"],
            "summary": "Unsubscribe explicitly",
            "operationId": "unsubscribe",
            "description": "Idempotent; leaves an `unsubscribed` row so older automatic triggers cannot undo it. The request body, if any, is ignored (but must be `application/json`).\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Uid"},
              {"$ref": "\u0023/components/parameters/MessageId"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "The state.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/SubscriptionState"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/subscriptions/lookup": {
          "post": {
            "tags": ["Subscriptions"],
            "summary": "Subscription state for many messages",
            "operationId": "lookupSubscriptions",
            "description": "A reply reports its thread's state; unknown, deleted or inaccessible ids are false.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Uid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {
              "required": true,
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": ["messageIds"],
                    "properties": {
                      "messageIds": {
                        "type": "array",
                        "maxItems": 1000,
                        "description": "More than 1000: 400 `ERR_INVALID_LIMIT`.",
                        "items": {
                          "type": ["string", "integer"],
                          "minLength": 1,
                          "maxLength": 128,
                          "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$",
                          "minimum": -9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999,
                          "maximum": 99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999,
                          "description": "A message id. An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'. A JSON integer means its decimal string."
                        }
                      }
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "State by message id.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/LookupResult"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/groups/{guid}/members": {
          "put": {
            "tags": ["Membership"],
            "summary": "Replace a group's member set",
            "operationId": "replaceMembers",
            "description": "A snapshot, as evidence at the request's time: listed users who are not members join now; members not listed leave now.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Guid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {
              "required": true,
              "content": {
                "application/json": {
                  "schema": {
                    "type": "object",
                    "required": ["members"],
                    "properties": {
                      "members": {
                        "type": "array",
                        "maxItems": 100000,
                        "items": {
                          "type": ["string", "integer"],
                          "minLength": 1,
                          "maxLength": 128,
                          "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$",
                          "minimum": -9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999,
                          "maximum": 99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999,
                          "description": "A uid. An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'. A JSON integer means its decimal string."
                        }
                      }
                    }
                  }
                }
              }
            },
            "responses": {
              "200": {
                "description": "The number of distinct uids in the snapshot.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/MemberCount"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "get": {
            "tags": ["Membership"],
            "summary": "List a group's current members",
            "operationId": "listMembers",
            "description": "Ordered by uid; an unknown group is an empty list.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Guid"},
              {"$ref": "\u0023/components/parameters/Limit100"},
              {"$ref": "\u0023/components/parameters/Cursor"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "A page of members.",
                "content": {
                  "application/json": {
                    "schema": {
                      "type": "object",
                      "description": "Members",
                      "required": ["data", "meta"],
                      "properties": {
                        "data": {"type": "array", "items": {"$ref": "\u0023/components/schemas/Member"}},
                        "meta": {"$ref": "\u0023/components/schemas/ListMeta"}
                      }
                    }
                  }
                }
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/threads": {
          "get": {
            "tags": ["Inbox"],
            "summary": "A user's thread inbox",
            "operationId": "listThreads",
            "description": "Threads the user is subscribed to, not deleted, still accessible, with a reply or subscribed explicitly; last activity first. The cursor is bound to the user, the filter and `unreadOnly`.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Uid"},
              {"$ref": "\u0023/components/parameters/Limit30"},
              {"$ref": "\u0023/components/parameters/Cursor"},
              {"$ref": "\u0023/components/parameters/GuidFilter"},
              {"$ref": "\u0023/components/parameters/PeerFilter"},
              {
                "name": "unreadOnly",
                "in": "query",
                "required": false,
                "description": "Only threads with unread replies.",
                "schema": {"type": "boolean", "default": false}
              },
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "A page of the inbox.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/InboxPage"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/threads/{messageId}/read": {
          "post": {
            "tags": ["Inbox"],
            "summary": "Mark a thread read",
            "operationId": "markThreadRead",
            "description": "Up to the given reply (default: the latest); the read position only moves forward. The body is optional. A `messageId` that is not a reply of this thread is 404 `ERR_MESSAGE_ID_NOT_FOUND`.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Uid"},
              {"$ref": "\u0023/components/parameters/MessageId"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "requestBody": {"required": false, "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/ReadBody"}}}},
            "responses": {
              "200": {
                "description": "The inbox row.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/InboxRow"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/threads/read": {
          "post": {
            "tags": ["Inbox"],
            "summary": "Mark every thread read",
            "operationId": "markAllThreadsRead",
            "description": "Every thread of the inbox, or of one conversation (`guid` or `uid`). The request body, if any, is ignored (but must be `application/json`).\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Uid"},
              {"$ref": "\u0023/components/parameters/GuidFilter"},
              {"$ref": "\u0023/components/parameters/PeerFilter"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "How many threads changed.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Updated"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/settings/notifications": {
          "get": {
            "tags": ["Preferences"],
            "summary": "The app's notification settings",
            "operationId": "getSettings",
            "description": "Allowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "responses": {
              "200": {
                "description": "The settings.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Settings"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "patch": {
            "tags": ["Preferences"],
            "summary": "Merge into the app's notification settings",
            "operationId": "patchSettings",
            "description": "Allowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {
              "required": true,
              "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/SettingsPatch"}}}
            },
            "responses": {
              "200": {
                "description": "The settings after the merge.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Settings"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "delete": {
            "tags": ["Preferences"],
            "summary": "Restore the built-in settings",
            "operationId": "resetSettings",
            "description": "Every field back to SPEC §7.1's default, overridable.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "responses": {
              "200": {
                "description": "The built-in settings.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Settings"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/preferences": {
          "get": {
            "tags": ["Preferences"],
            "summary": "A user's effective preferences",
            "operationId": "getPreferences",
            "description": "Allowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Uid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "responses": {
              "200": {
                "description": "The effective view.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Preferences"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "patch": {
            "tags": ["Preferences"],
            "summary": "Merge into a user's preferences",
            "operationId": "patchPreferences",
            "description": "Allowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Uid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {
              "required": true,
              "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/PreferencesPatch"}}}
            },
            "responses": {
              "200": {
                "description": "The effective view after the merge.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Preferences"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "delete": {
            "tags": ["Preferences"],
            "summary": "Remove a user's choices",
            "operationId": "resetPreferences",
            "description": "Allowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Uid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "responses": {
              "200": {
                "description": "The app defaults.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Preferences"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/mutes": {
          "get": {
            "tags": ["Preferences"],
            "summary": "A user's mutes",
            "operationId": "getMutes",
            "description": "Expired mutes are not listed.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Uid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "responses": {
              "200": {
                "description": "The mutes.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Mutes"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "put": {
            "tags": ["Preferences"],
            "summary": "Add or update mutes",
            "operationId": "putMutes",
            "description": "One invalid entry: 400 `ERR_INVALID_PREFERENCE` and nothing saved.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Uid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/MutesPut"}}}},
            "responses": {
              "200": {
                "description": "The current mutes.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Mutes"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          },
          "delete": {
            "tags": ["Preferences"],
            "summary": "Remove mutes",
            "operationId": "deleteMutes",
            "description": "One invalid entry: 400 `ERR_INVALID_PREFERENCE` and nothing removed.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/Uid"}, {"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {
              "required": true,
              "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/MutesDelete"}}}
            },
            "responses": {
              "200": {
                "description": "The current mutes.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Mutes"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/users/{uid}/messages/{messageId}/routing": {
          "get": {
            "tags": ["Routing"],
            "summary": "Why a user did or did not get a push for a message",
            "operationId": "explainRouting",
            "description": "A user without access gets 200 with `NO_ACCESS`; an unknown or deleted message is 404.\n\nAllowed: `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Uid"},
              {"$ref": "\u0023/components/parameters/MessageId"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "The decision.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/RoutingDecision"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/jobs/claim": {
          "post": {
            "tags": ["Jobs"],
            "summary": "Lease jobs",
            "operationId": "claimJobs",
            "description": "Leases up to `max` ready jobs for `leaseSeconds`; with `waitSeconds` and no job ready, the call waits until jobs exist or the time passes. Out-of-range values: 400 `ERR_INVALID_LIMIT`. The body is optional.\n\nAllowed: `worker` and `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {"required": false, "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Claim"}}}},
            "responses": {
              "200": {
                "description": "The leased jobs (possibly none).",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Jobs"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/jobs/ack": {
          "post": {
            "tags": ["Jobs"],
            "summary": "Acknowledge delivered jobs",
            "operationId": "ackJobs",
            "description": "An entry whose attempt is not the job's current one, or whose job is not leased, is stale and ignored.\n\nAllowed: `worker` and `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/AckBody"}}}},
            "responses": {
              "200": {
                "description": "Acked count and stale ids.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/AckResult"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/jobs/fail": {
          "post": {
            "tags": ["Jobs"],
            "summary": "Report failed deliveries",
            "operationId": "failJobs",
            "description": "Retried later, or dead at attempt 8 or with `retryable: false`.\n\nAllowed: `worker` and `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/FailBody"}}}},
            "responses": {
              "200": {
                "description": "Counts and stale ids.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/FailResult"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/jobs/stats": {
          "get": {
            "tags": ["Jobs"],
            "summary": "Queue statistics",
            "operationId": "jobStats",
            "description": "Allowed: `worker` and `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "responses": {
              "200": {
                "description": "Counts.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/JobStats"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/jobs/dead": {
          "get": {
            "tags": ["Jobs"],
            "summary": "List dead jobs",
            "operationId": "listDeadJobs",
            "description": "Oldest first, with their last error.\n\nAllowed: `worker` and `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [
              {"$ref": "\u0023/components/parameters/Limit100"},
              {"$ref": "\u0023/components/parameters/CursorDead"},
              {"$ref": "\u0023/components/parameters/XAppId"}
            ],
            "responses": {
              "200": {
                "description": "A page of dead jobs.",
                "content": {
                  "application/json": {
                    "schema": {
                      "type": "object",
                      "description": "Dead jobs",
                      "required": ["data", "meta"],
                      "properties": {
                        "data": {"type": "array", "items": {"$ref": "\u0023/components/schemas/DeadJob"}},
                        "meta": {"$ref": "\u0023/components/schemas/ListMeta"}
                      }
                    }
                  }
                }
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        },
        "/v1/jobs/dead/requeue": {
          "post": {
            "tags": ["Jobs"],
            "summary": "Requeue dead jobs",
            "operationId": "requeueDeadJobs",
            "description": "Attempts start again at 0; the jobs get new ids. Ids that are not dead are skipped.\n\nAllowed: `worker` and `server` keys (or the admin token naming the app in `X-App-Id`).",
            "parameters": [{"$ref": "\u0023/components/parameters/XAppId"}],
            "requestBody": {
              "required": true,
              "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/RequeueBody"}}}
            },
            "responses": {
              "200": {
                "description": "How many were requeued.",
                "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Requeued"}}}
              },
              "400": {"$ref": "\u0023/components/responses/BadRequest"},
              "401": {"$ref": "\u0023/components/responses/Unauthorized"},
              "403": {"$ref": "\u0023/components/responses/Forbidden"},
              "404": {"$ref": "\u0023/components/responses/NotFound"},
              "413": {"$ref": "\u0023/components/responses/PayloadTooLarge"},
              "415": {"$ref": "\u0023/components/responses/UnsupportedMediaType"},
              "429": {"$ref": "\u0023/components/responses/TooManyRequests"},
              "503": {"$ref": "\u0023/components/responses/ServiceUnavailable"}
            }
          }
        }
      },
      "components": {
        "securitySchemes": {
          "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": "The admin token (`HERALD_ADMIN_TOKEN`), or an app key `hk_<id>_<secret>` whose role (`ingest`, `worker`, `server`) decides the routes it may call."
          }
        },
        "parameters": {
          "XAppId": {
            "name": "X-App-Id",
            "in": "header",
            "required": false,
            "description": "The app to act in. Required with the admin token on app routes (missing: 400; unknown app: 404 `ERR_APP_NOT_FOUND`). An app key may send its own app; another app is 403.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$"}
          },
          "Uid": {
            "name": "uid",
            "in": "path",
            "required": true,
            "description": "The user. An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$"}
          },
          "Guid": {
            "name": "guid",
            "in": "path",
            "required": true,
            "description": "The group. An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$"}
          },
          "MessageId": {
            "name": "messageId",
            "in": "path",
            "required": true,
            "description": "A message id: a thread's parent or one of its replies. An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$"}
          },
          "AppPath": {
            "name": "app",
            "in": "path",
            "required": true,
            "description": "The app id.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$"}
          },
          "KeyId": {
            "name": "keyId",
            "in": "path",
            "required": true,
            "description": "The key's public id.",
            "schema": {"type": "string", "minLength": 1}
          },
          "Limit100": {
            "name": "limit",
            "in": "query",
            "required": false,
            "description": "Page size.",
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}
          },
          "Limit30": {
            "name": "limit",
            "in": "query",
            "required": false,
            "description": "Page size.",
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 30}
          },
          "Cursor": {
            "name": "cursor",
            "in": "query",
            "required": false,
            "description": "Opaque: the `meta.next` of the previous page (empty means none). A cursor of another list, or one that does not decode, is 400 with `params.field = \"cursor\"`.",
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]*$"}
          },
          "CursorRejected": {
            "name": "cursor",
            "in": "query",
            "required": false,
            "description": "Opaque: the `meta.next` of the previous page (empty means none). Another list's cursor is 400 with `params.field = \"cursor\"`.",
            "schema": {
              "type": "string",
              "pattern": "^(?:|cmVqZWN0ZWQf(?:(?:(?:[MN][DTjz]|O[DT])[AEIMQUYcgk][w-z0-5]){0,5}(?:(?:[MN][AQgw]|O[AQ])|(?:[MN][DTjz]|O[DT])[AEIMQUYcgk])|(?:(?:[MN][DTjz]|O[DT])[AEIMQUYcgk][w-z0-5]){1,5}))$"
            }
          },
          "CursorDead": {
            "name": "cursor",
            "in": "query",
            "required": false,
            "description": "Opaque: the `meta.next` of the previous page (empty means none). Another list's cursor is 400 with `params.field = \"cursor\"`.",
            "schema": {
              "type": "string",
              "pattern": "^(?:|ZGVhZB8[w-z0-5](?:(?:[MN][DTjz]|O[DT])[AEIMQUYcgk][w-z0-5]){0,5}(?:(?:[MN][AQgw]|O[AQ])|(?:[MN][DTjz]|O[DT])[AEIMQUYcgk])?)$"
            }
          },
          "GuidFilter": {
            "name": "guid",
            "in": "query",
            "required": false,
            "description": "Only this group's threads. Not together with `uid` (400 `ERR_INVALID_FILTER`).",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$"}
          },
          "PeerFilter": {
            "name": "uid",
            "in": "query",
            "required": false,
            "description": "Only the one-on-one conversation with this user. Not together with `guid` (400 `ERR_INVALID_FILTER`).",
            "schema": {"type": "string", "minLength": 1, "maxLength": 128, "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$"}
          }
        },
        "responses": {
          "BadRequest": {
            "description": "Bad input: `ERR_BAD_REQUEST` (body not valid JSON, wrong type, missing or invalid field, bad cursor; `params.field` names it; the admin token without `X-App-Id` on an app route), `ERR_INVALID_LIMIT`, `ERR_INVALID_FILTER`, `ERR_INVALID_PREFERENCE`.",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}}
          },
          "Unauthorized": {
            "description": "`AUTH_ERR_APIKEY_NOT_FOUND`: missing, unknown or revoked token.",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}}
          },
          "Forbidden": {
            "description": "`AUTH_ERR_NO_ACCESS`: the token's role may not use this route, or an app key named another app in `X-App-Id`; `ERR_MESSAGE_NO_ACCESS`: the user has no access to the message's conversation.",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}}
          },
          "NotFound": {
            "description": "`ERR_APP_NOT_FOUND` (the admin token's `X-App-Id`, or the `{app}` of an admin route), `ERR_MESSAGE_ID_NOT_FOUND` (message never seen, or deleted), `ERR_NOT_FOUND` (no such key).",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}}
          },
          "Conflict": {
            "description": "`ERR_ALREADY_EXISTS`.",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}}
          },
          "PayloadTooLarge": {
            "description": "`ERR_PAYLOAD_TOO_LARGE`: the body is over the limit (default 4 MiB).",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}}
          },
          "UnsupportedMediaType": {
            "description": "`ERR_UNSUPPORTED_MEDIA_TYPE`: a body of another `Content-Type`.",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}}
          },
          "TooManyRequests": {
            "description": "`ERR_OVERLOADED`: too many requests in flight (ingest's in-flight limit, or no database connection free in time).",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}},
            "headers": {
              "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer", "minimum": 0}}
            }
          },
          "ServiceUnavailable": {
            "description": "`ERR_UNAVAILABLE`: the database is unavailable.",
            "content": {"application/json": {"schema": {"$ref": "\u0023/components/schemas/Error"}}},
            "headers": {
              "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer", "minimum": 0}}
            }
          }
        },
        "schemas": {
          "Error": {
            "type": "object",
            "description": "Every error (SPEC §3).",
            "required": ["error"],
            "properties": {
              "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                  "code": {"type": "string", "description": "`ERR_…` or `AUTH_ERR_…`.", "examples": ["ERR_BAD_REQUEST"]},
                  "message": {"type": "string", "description": "Human text."},
                  "params": {
                    "type": "object",
                    "description": "Absent when there is nothing to add. `field` names the offending input (a query parameter's or header's name, or a dotted JSON path with indexes such as `jobs[0].attempt`); `min`/`max` give bounds.",
                    "properties": {"field": {"type": "string"}, "min": {"type": "integer"}, "max": {"type": "integer"}},
                    "additionalProperties": true
                  }
                }
              }
            }
          },
          "ListMeta": {
            "type": "object",
            "required": ["next", "hasMore"],
            "properties": {
              "next": {
                "type": ["string", "null"],
                "description": "The cursor of the next page (exclusive), or null on the last page."
              },
              "hasMore": {"type": "boolean"}
            }
          },
          "Health": {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}},
          "Readiness": {
            "type": "object",
            "required": ["status", "schemaVersion"],
            "properties": {"status": {"const": "ready"}, "schemaVersion": {"type": "integer"}}
          },
          "WhoAmI": {
            "type": "object",
            "required": ["app", "role"],
            "properties": {
              "app": {"type": "string"},
              "role": {"type": "string", "enum": ["ingest", "worker", "server", "admin"]},
              "keyId": {"type": "string", "description": "The key's public id; absent for the admin token."}
            }
          },
          "Role": {"type": "string", "enum": ["ingest", "worker", "server"]},
          "App": {
            "type": "object",
            "required": ["id", "createdAt"],
            "properties": {"id": {"type": "string"}, "createdAt": {"type": "integer", "description": "Epoch ms."}}
          },
          "KeyInfo": {
            "type": "object",
            "required": ["id", "role", "createdAt"],
            "properties": {
              "id": {"type": "string"},
              "role": {"$ref": "\u0023/components/schemas/Role"},
              "label": {"type": "string", "description": "Absent when the key has no label."},
              "createdAt": {"type": "integer"}
            }
          },
          "CreatedKey": {
            "type": "object",
            "required": ["id", "key", "role", "createdAt"],
            "properties": {
              "id": {"type": "string"},
              "key": {
                "type": "string",
                "pattern": "^hk_[0-9a-f]{16}_[0-9a-f]{64}$",
                "description": "The secret token, shown only here: `Authorization: Bearer <key>`."
              },
              "role": {"$ref": "\u0023/components/schemas/Role"},
              "label": {"type": "string", "description": "Absent when the key has no label."},
              "createdAt": {"type": "integer"}
            }
          },
          "EventError": {
            "type": "object",
            "description": "Why one event was rejected.",
            "required": ["code", "message"],
            "properties": {
              "code": {"type": "string", "examples": ["ERR_BAD_REQUEST", "ERR_UNKNOWN_EVENT_TYPE"]},
              "message": {"type": "string"},
              "params": {"type": "object", "properties": {"field": {"type": "string"}}}
            }
          },
          "CloudEvent": {
            "type": "object",
            "description": "A CloudEvents 1.0 event (SPEC §4). Herald validates each event on its own: an invalid one is reported as `rejected` in the 200 response, not as a 400.",
            "required": ["specversion", "id", "source", "type", "data"],
            "properties": {
              "specversion": {"const": "1.0"},
              "id": {"type": "string", "minLength": 1, "description": "At most 256 bytes, no control characters."},
              "source": {
                "type": "string",
                "minLength": 1,
                "description": "At most 256 bytes, no control characters. `(source, id)` identifies the event."
              },
              "type": {
                "type": "string",
                "enum": [
                  "message.created", "message.edited", "message.deleted", "member.joined", "member.added",
                  "member.left", "member.kicked", "member.banned", "member.unbanned", "member.scopeChanged",
                  "group.deleted"
                ]
              },
              "time": {"type": "string"},
              "subject": {"type": "string"},
              "datacontenttype": {"type": "string"},
              "data": {
                "type": "object",
                "description": "Depends on `type`. `message.created`: `id`, `sender`, `receiverType` (`group`|`user`), `receiver`, `sentAt` required; `parentId`, `parentSender`, `category`, `type`, `text` (truncated to 4096 characters), `mentions`, `mentionsAll`, `quotedMessageId`, `quotedSender`, `sendNotification` optional. `message.edited`: `id`, `sender`, `receiverType`, `receiver`, `editedAt`, optional `parentId`, `text`, `mentions`, `mentionsAll`. `message.deleted`: `id`, `receiverType`, `receiver`, `deletedAt`, optional `parentId`. `member.*`: `guid`, `uid`, `at`. `group.deleted`: `guid`, `at`. Ids are strings (or JSON integers); times are epoch milliseconds, at most a day ahead.",
                "properties": {
                  "id": {"type": ["string", "integer"]},
                  "sender": {"type": ["string", "integer"]},
                  "receiverType": {"type": "string", "enum": ["group", "user"]},
                  "receiver": {"type": ["string", "integer"]},
                  "parentId": {"type": ["string", "integer", "null"]},
                  "parentSender": {"type": ["string", "integer", "null"]},
                  "sentAt": {"type": "integer", "minimum": 0},
                  "editedAt": {"type": "integer", "minimum": 0},
                  "deletedAt": {"type": "integer", "minimum": 0},
                  "category": {"type": ["string", "null"]},
                  "type": {"type": ["string", "null"]},
                  "text": {"type": ["string", "null"]},
                  "mentions": {"type": ["array", "null"], "items": {"type": ["string", "integer"]}},
                  "mentionsAll": {"type": ["boolean", "null"]},
                  "quotedMessageId": {"type": ["string", "integer", "null"]},
                  "quotedSender": {"type": ["string", "integer", "null"]},
                  "sendNotification": {"type": ["boolean", "null"]},
                  "guid": {"type": ["string", "integer"]},
                  "uid": {"type": ["string", "integer"]},
                  "at": {"type": "integer", "minimum": 0}
                }
              }
            },
            "examples": [
              {
                "specversion": "1.0",
                "id": "e1",
                "source": "chat",
                "type": "message.created",
                "data": {
                  "id": "m42",
                  "sender": "alice",
                  "receiverType": "group",
                  "receiver": "g1",
                  "parentId": "m7",
                  "sentAt": 1764410000000,
                  "text": "hi <@uid:carol>",
                  "mentions": ["carol"]
                }
              }
            ]
          },
          "EventsBody": {
            "description": "One event (structured mode) or an array of at most 1000 (batched mode). Any JSON object or array is accepted at the HTTP level; each element that is not a valid CloudEvent (see `CloudEvent`) is reported `rejected` in the 200 response. Only a body that is not JSON, a top level that is neither an object nor an array, or more than 1000 events is a 400.",
            "anyOf": [
              {"$ref": "\u0023/components/schemas/CloudEvent"},
              {"type": "object"},
              {"type": "array", "maxItems": 1000, "items": {"anyOf": [{"$ref": "\u0023/components/schemas/CloudEvent"}, {}]}}
            ]
          },
          "IngestResult": {
            "type": "object",
            "required": ["accepted", "duplicates", "rejected", "results"],
            "properties": {
              "accepted": {"type": "integer", "minimum": 0},
              "duplicates": {"type": "integer", "minimum": 0},
              "rejected": {"type": "integer", "minimum": 0},
              "results": {
                "type": "array",
                "description": "One per event, in request order.",
                "items": {
                  "type": "object",
                  "required": ["id", "source", "status"],
                  "properties": {
                    "id": {"type": ["string", "null"]},
                    "source": {"type": ["string", "null"]},
                    "status": {"type": "string", "enum": ["accepted", "duplicate", "rejected"]},
                    "error": {"$ref": "\u0023/components/schemas/EventError"}
                  }
                }
              }
            }
          },
          "RejectedEvent": {
            "type": "object",
            "description": "What was known of a rejected event. Text is kept as received, except U+0000, which PostgreSQL cannot store: it is listed as U+FFFD (the ingest response echoes it as sent).",
            "required": ["id", "source", "type", "error", "receivedAt", "event"],
            "properties": {
              "id": {"type": ["string", "null"]},
              "source": {"type": ["string", "null"]},
              "type": {"type": ["string", "null"]},
              "error": {"$ref": "\u0023/components/schemas/EventError"},
              "receivedAt": {"type": "integer"},
              "event": {"description": "The event as received (any JSON value; U+0000 is stored as U+FFFD)."}
            }
          },
          "SubscriptionState": {
            "type": "object",
            "required": ["parentMessageId", "subscribed", "since"],
            "properties": {
              "parentMessageId": {"type": "string", "description": "The thread: a reply's id resolves to its parent."},
              "subscribed": {"type": "boolean"},
              "source": {
                "type": ["string", "null"],
                "enum": ["auto", "manual", null],
                "description": "Present only while subscribed."
              },
              "reason": {
                "type": ["string", "null"],
                "enum": ["started", "reply", "mention", "manual", null],
                "description": "Present only while subscribed."
              },
              "since": {
                "type": ["integer", "null"],
                "description": "When the current state began; null when the user has no row for the thread."
              }
            }
          },
          "LookupResult": {
            "type": "object",
            "required": ["data"],
            "properties": {
              "data": {
                "type": "object",
                "additionalProperties": {"type": "boolean"},
                "description": "Each requested id (as a string) → whether the user is subscribed to its thread."
              }
            }
          },
          "MemberCount": {
            "type": "object",
            "required": ["count"],
            "properties": {"count": {"type": "integer", "minimum": 0, "description": "Distinct uids in the snapshot."}}
          },
          "Member": {
            "type": "object",
            "required": ["uid", "since"],
            "properties": {"uid": {"type": "string"}, "since": {"type": "integer"}}
          },
          "MessageSummary": {
            "type": "object",
            "required": ["id", "sender", "sentAt", "text"],
            "properties": {
              "id": {"type": "string"},
              "sender": {"type": ["string", "null"]},
              "sentAt": {"type": ["integer", "null"]},
              "text": {"type": ["string", "null"]}
            }
          },
          "InboxRow": {
            "type": "object",
            "required": [
              "parentMessageId", "conversationId", "receiverType", "receiver", "parent", "replyCount", "lastReply",
              "unreadReplyCount", "unreadMentionCount", "subscribed", "subscription", "updatedAt"
            ],
            "properties": {
              "parentMessageId": {"type": "string"},
              "conversationId": {"type": "string"},
              "receiverType": {"type": "string", "enum": ["group", "user"]},
              "receiver": {
                "type": ["string", "null"],
                "description": "The guid, or for a one-on-one thread the other user as seen by the owner."
              },
              "parent": {"$ref": "\u0023/components/schemas/MessageSummary"},
              "replyCount": {"type": "integer", "minimum": 0},
              "lastReply": {"anyOf": [{"$ref": "\u0023/components/schemas/MessageSummary"}, {"type": "null"}]},
              "unreadReplyCount": {"type": "integer", "minimum": 0},
              "unreadMentionCount": {"type": "integer", "minimum": 0},
              "subscribed": {"type": "boolean"},
              "subscription": {
                "anyOf": [
                  {
                    "type": "object",
                    "required": ["source", "reason", "since"],
                    "properties": {
                      "source": {"type": ["string", "null"]},
                      "reason": {"type": ["string", "null"]},
                      "since": {"type": ["integer", "null"]}
                    }
                  },
                  {"type": "null"}
                ],
                "description": "null when not subscribed."
              },
              "updatedAt": {"type": "integer"}
            }
          },
          "InboxPage": {
            "type": "object",
            "required": ["data", "meta", "totals"],
            "properties": {
              "data": {"type": "array", "items": {"$ref": "\u0023/components/schemas/InboxRow"}},
              "meta": {"$ref": "\u0023/components/schemas/ListMeta"},
              "totals": {
                "type": "object",
                "description": "Over the user's whole inbox, whatever the filter, cursor or unreadOnly.",
                "required": ["unreadThreads", "unreadMentions"],
                "properties": {
                  "unreadThreads": {"type": "integer", "minimum": 0},
                  "unreadMentions": {"type": "integer", "minimum": 0}
                }
              }
            }
          },
          "ReadBody": {
            "type": "object",
            "properties": {
              "messageId": {
                "type": ["string", "integer", "null"],
                "description": "A reply of the thread to mark read up to (default: the latest reply). An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'.",
                "minLength": 1,
                "maxLength": 128,
                "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$",
                "minimum": -9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999,
                "maximum": 99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999
              }
            }
          },
          "Updated": {"type": "object", "required": ["updated"], "properties": {"updated": {"type": "integer", "minimum": 0}}},
          "Schedule": {
            "type": "object",
            "description": "Per-day delivery windows in the user's time zone.",
            "required": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"],
            "properties": {
              "monday": {"$ref": "\u0023/components/schemas/ScheduleDay"},
              "tuesday": {"$ref": "\u0023/components/schemas/ScheduleDay"},
              "wednesday": {"$ref": "\u0023/components/schemas/ScheduleDay"},
              "thursday": {"$ref": "\u0023/components/schemas/ScheduleDay"},
              "friday": {"$ref": "\u0023/components/schemas/ScheduleDay"},
              "saturday": {"$ref": "\u0023/components/schemas/ScheduleDay"},
              "sunday": {"$ref": "\u0023/components/schemas/ScheduleDay"}
            }
          },
          "ScheduleDay": {
            "type": "object",
            "required": ["from", "to", "dnd"],
            "properties": {
              "from": {"type": "integer", "minimum": 0, "maximum": 2359},
              "to": {"type": "integer", "minimum": 0, "maximum": 2359},
              "dnd": {"type": "boolean"}
            }
          },
          "SchedulePatch": {
            "type": "object",
            "description": "Days to change; a day given in part keeps its other fields. `from` must not be after `to` (after merging), else 400.",
            "additionalProperties": false,
            "properties": {
              "monday": {"$ref": "\u0023/components/schemas/ScheduleDayPatch"},
              "tuesday": {"$ref": "\u0023/components/schemas/ScheduleDayPatch"},
              "wednesday": {"$ref": "\u0023/components/schemas/ScheduleDayPatch"},
              "thursday": {"$ref": "\u0023/components/schemas/ScheduleDayPatch"},
              "friday": {"$ref": "\u0023/components/schemas/ScheduleDayPatch"},
              "saturday": {"$ref": "\u0023/components/schemas/ScheduleDayPatch"},
              "sunday": {"$ref": "\u0023/components/schemas/ScheduleDayPatch"}
            }
          },
          "ScheduleDayPatch": {
            "type": "object",
            "additionalProperties": false,
            "properties": {
              "from": {"$ref": "\u0023/components/schemas/HHMM"},
              "to": {"$ref": "\u0023/components/schemas/HHMM"},
              "dnd": {"type": "boolean"}
            }
          },
          "HHMM": {
            "description": "A time of day as HHMM (0-2359, minutes below 60).",
            "anyOf": [
              {"type": "integer", "minimum": 0, "maximum": 59},
              {"type": "integer", "minimum": 100, "maximum": 159},
              {"type": "integer", "minimum": 200, "maximum": 259},
              {"type": "integer", "minimum": 300, "maximum": 359},
              {"type": "integer", "minimum": 400, "maximum": 459},
              {"type": "integer", "minimum": 500, "maximum": 559},
              {"type": "integer", "minimum": 600, "maximum": 659},
              {"type": "integer", "minimum": 700, "maximum": 759},
              {"type": "integer", "minimum": 800, "maximum": 859},
              {"type": "integer", "minimum": 900, "maximum": 959},
              {"type": "integer", "minimum": 1000, "maximum": 1059},
              {"type": "integer", "minimum": 1100, "maximum": 1159},
              {"type": "integer", "minimum": 1200, "maximum": 1259},
              {"type": "integer", "minimum": 1300, "maximum": 1359},
              {"type": "integer", "minimum": 1400, "maximum": 1459},
              {"type": "integer", "minimum": 1500, "maximum": 1559},
              {"type": "integer", "minimum": 1600, "maximum": 1659},
              {"type": "integer", "minimum": 1700, "maximum": 1759},
              {"type": "integer", "minimum": 1800, "maximum": 1859},
              {"type": "integer", "minimum": 1900, "maximum": 1959},
              {"type": "integer", "minimum": 2000, "maximum": 2059},
              {"type": "integer", "minimum": 2100, "maximum": 2159},
              {"type": "integer", "minimum": 2200, "maximum": 2259},
              {"type": "integer", "minimum": 2300, "maximum": 2359}
            ]
          },
          "TimeZone": {
            "type": "string",
            "description": "An IANA time zone name.",
            "enum": [
              "Africa/Abidjan", "Africa/Accra", "Africa/Addis_Ababa", "Africa/Algiers", "Africa/Asmara",
              "Africa/Asmera", "Africa/Bamako", "Africa/Bangui", "Africa/Banjul", "Africa/Bissau", "Africa/Blantyre",
              "Africa/Brazzaville", "Africa/Bujumbura", "Africa/Cairo", "Africa/Casablanca", "Africa/Ceuta",
              "Africa/Conakry", "Africa/Dakar", "Africa/Dar_es_Salaam", "Africa/Djibouti", "Africa/Douala",
              "Africa/El_Aaiun", "Africa/Freetown", "Africa/Gaborone", "Africa/Harare", "Africa/Johannesburg",
              "Africa/Juba", "Africa/Kampala", "Africa/Khartoum", "Africa/Kigali", "Africa/Kinshasa", "Africa/Lagos",
              "Africa/Libreville", "Africa/Lome", "Africa/Luanda", "Africa/Lubumbashi", "Africa/Lusaka",
              "Africa/Malabo", "Africa/Maputo", "Africa/Maseru", "Africa/Mbabane", "Africa/Mogadishu",
              "Africa/Monrovia", "Africa/Nairobi", "Africa/Ndjamena", "Africa/Niamey", "Africa/Nouakchott",
              "Africa/Ouagadougou", "Africa/Porto-Novo", "Africa/Sao_Tome", "Africa/Timbuktu", "Africa/Tripoli",
              "Africa/Tunis", "Africa/Windhoek", "America/Adak", "America/Anchorage", "America/Anguilla",
              "America/Antigua", "America/Araguaina", "America/Argentina/Buenos_Aires", "America/Argentina/Catamarca",
              "America/Argentina/ComodRivadavia", "America/Argentina/Cordoba", "America/Argentina/Jujuy",
              "America/Argentina/La_Rioja", "America/Argentina/Mendoza", "America/Argentina/Rio_Gallegos",
              "America/Argentina/Salta", "America/Argentina/San_Juan", "America/Argentina/San_Luis",
              "America/Argentina/Tucuman", "America/Argentina/Ushuaia", "America/Aruba", "America/Asuncion",
              "America/Atikokan", "America/Atka", "America/Bahia", "America/Bahia_Banderas", "America/Barbados",
              "America/Belem", "America/Belize", "America/Blanc-Sablon", "America/Boa_Vista", "America/Bogota",
              "America/Boise", "America/Buenos_Aires", "America/Cambridge_Bay", "America/Campo_Grande",
              "America/Cancun", "America/Caracas", "America/Catamarca", "America/Cayenne", "America/Cayman",
              "America/Chicago", "America/Chihuahua", "America/Ciudad_Juarez", "America/Coral_Harbour",
              "America/Cordoba", "America/Costa_Rica", "America/Coyhaique", "America/Creston", "America/Cuiaba",
              "America/Curacao", "America/Danmarkshavn", "America/Dawson", "America/Dawson_Creek", "America/Denver",
              "America/Detroit", "America/Dominica", "America/Edmonton", "America/Eirunepe", "America/El_Salvador",
              "America/Ensenada", "America/Fort_Nelson", "America/Fort_Wayne", "America/Fortaleza", "America/Glace_Bay",
              "America/Godthab", "America/Goose_Bay", "America/Grand_Turk", "America/Grenada", "America/Guadeloupe",
              "America/Guatemala", "America/Guayaquil", "America/Guyana", "America/Halifax", "America/Havana",
              "America/Hermosillo", "America/Indiana/Indianapolis", "America/Indiana/Knox", "America/Indiana/Marengo",
              "America/Indiana/Petersburg", "America/Indiana/Tell_City", "America/Indiana/Vevay",
              "America/Indiana/Vincennes", "America/Indiana/Winamac", "America/Indianapolis", "America/Inuvik",
              "America/Iqaluit", "America/Jamaica", "America/Jujuy", "America/Juneau", "America/Kentucky/Louisville",
              "America/Kentucky/Monticello", "America/Knox_IN", "America/Kralendijk", "America/La_Paz", "America/Lima",
              "America/Los_Angeles", "America/Louisville", "America/Lower_Princes", "America/Maceio", "America/Managua",
              "America/Manaus", "America/Marigot", "America/Martinique", "America/Matamoros", "America/Mazatlan",
              "America/Mendoza", "America/Menominee", "America/Merida", "America/Metlakatla", "America/Mexico_City",
              "America/Miquelon", "America/Moncton", "America/Monterrey", "America/Montevideo", "America/Montreal",
              "America/Montserrat", "America/Nassau", "America/New_York", "America/Nipigon", "America/Nome",
              "America/Noronha", "America/North_Dakota/Beulah", "America/North_Dakota/Center",
              "America/North_Dakota/New_Salem", "America/Nuuk", "America/Ojinaga", "America/Panama",
              "America/Pangnirtung", "America/Paramaribo", "America/Phoenix", "America/Port-au-Prince",
              "America/Port_of_Spain", "America/Porto_Acre", "America/Porto_Velho", "America/Puerto_Rico",
              "America/Punta_Arenas", "America/Rainy_River", "America/Rankin_Inlet", "America/Recife", "America/Regina",
              "America/Resolute", "America/Rio_Branco", "America/Rosario", "America/Santa_Isabel", "America/Santarem",
              "America/Santiago", "America/Santo_Domingo", "America/Sao_Paulo", "America/Scoresbysund",
              "America/Shiprock", "America/Sitka", "America/St_Barthelemy", "America/St_Johns", "America/St_Kitts",
              "America/St_Lucia", "America/St_Thomas", "America/St_Vincent", "America/Swift_Current",
              "America/Tegucigalpa", "America/Thule", "America/Thunder_Bay", "America/Tijuana", "America/Toronto",
              "America/Tortola", "America/Vancouver", "America/Virgin", "America/Whitehorse", "America/Winnipeg",
              "America/Yakutat", "America/Yellowknife", "Antarctica/Casey", "Antarctica/Davis",
              "Antarctica/DumontDUrville", "Antarctica/Macquarie", "Antarctica/Mawson", "Antarctica/McMurdo",
              "Antarctica/Palmer", "Antarctica/Rothera", "Antarctica/South_Pole", "Antarctica/Syowa",
              "Antarctica/Troll", "Antarctica/Vostok", "Arctic/Longyearbyen", "Asia/Aden", "Asia/Almaty", "Asia/Amman",
              "Asia/Anadyr", "Asia/Aqtau", "Asia/Aqtobe", "Asia/Ashgabat", "Asia/Ashkhabad", "Asia/Atyrau",
              "Asia/Baghdad", "Asia/Bahrain", "Asia/Baku", "Asia/Bangkok", "Asia/Barnaul", "Asia/Beirut",
              "Asia/Bishkek", "Asia/Brunei", "Asia/Calcutta", "Asia/Chita", "Asia/Choibalsan", "Asia/Chongqing",
              "Asia/Chungking", "Asia/Colombo", "Asia/Dacca", "Asia/Damascus", "Asia/Dhaka", "Asia/Dili", "Asia/Dubai",
              "Asia/Dushanbe", "Asia/Famagusta", "Asia/Gaza", "Asia/Harbin", "Asia/Hebron", "Asia/Ho_Chi_Minh",
              "Asia/Hong_Kong", "Asia/Hovd", "Asia/Irkutsk", "Asia/Istanbul", "Asia/Jakarta", "Asia/Jayapura",
              "Asia/Jerusalem", "Asia/Kabul", "Asia/Kamchatka", "Asia/Karachi", "Asia/Kashgar", "Asia/Kathmandu",
              "Asia/Katmandu", "Asia/Khandyga", "Asia/Kolkata", "Asia/Krasnoyarsk", "Asia/Kuala_Lumpur", "Asia/Kuching",
              "Asia/Kuwait", "Asia/Macao", "Asia/Macau", "Asia/Magadan", "Asia/Makassar", "Asia/Manila", "Asia/Muscat",
              "Asia/Nicosia", "Asia/Novokuznetsk", "Asia/Novosibirsk", "Asia/Omsk", "Asia/Oral", "Asia/Phnom_Penh",
              "Asia/Pontianak", "Asia/Pyongyang", "Asia/Qatar", "Asia/Qostanay", "Asia/Qyzylorda", "Asia/Rangoon",
              "Asia/Riyadh", "Asia/Saigon", "Asia/Sakhalin", "Asia/Samarkand", "Asia/Seoul", "Asia/Shanghai",
              "Asia/Singapore", "Asia/Srednekolymsk", "Asia/Taipei", "Asia/Tashkent", "Asia/Tbilisi", "Asia/Tehran",
              "Asia/Tel_Aviv", "Asia/Thimbu", "Asia/Thimphu", "Asia/Tokyo", "Asia/Tomsk", "Asia/Ujung_Pandang",
              "Asia/Ulaanbaatar", "Asia/Ulan_Bator", "Asia/Urumqi", "Asia/Ust-Nera", "Asia/Vientiane",
              "Asia/Vladivostok", "Asia/Yakutsk", "Asia/Yangon", "Asia/Yekaterinburg", "Asia/Yerevan",
              "Atlantic/Azores", "Atlantic/Bermuda", "Atlantic/Canary", "Atlantic/Cape_Verde", "Atlantic/Faeroe",
              "Atlantic/Faroe", "Atlantic/Jan_Mayen", "Atlantic/Madeira", "Atlantic/Reykjavik",
              "Atlantic/South_Georgia", "Atlantic/St_Helena", "Atlantic/Stanley", "Australia/ACT", "Australia/Adelaide",
              "Australia/Brisbane", "Australia/Broken_Hill", "Australia/Canberra", "Australia/Currie",
              "Australia/Darwin", "Australia/Eucla", "Australia/Hobart", "Australia/LHI", "Australia/Lindeman",
              "Australia/Lord_Howe", "Australia/Melbourne", "Australia/NSW", "Australia/North", "Australia/Perth",
              "Australia/Queensland", "Australia/South", "Australia/Sydney", "Australia/Tasmania", "Australia/Victoria",
              "Australia/West", "Australia/Yancowinna", "Brazil/Acre", "Brazil/DeNoronha", "Brazil/East", "Brazil/West",
              "CET", "CST6CDT", "Canada/Atlantic", "Canada/Central", "Canada/Eastern", "Canada/Mountain",
              "Canada/Newfoundland", "Canada/Pacific", "Canada/Saskatchewan", "Canada/Yukon", "Chile/Continental",
              "Chile/EasterIsland", "Cuba", "EET", "EST", "EST5EDT", "Egypt", "Eire", "Etc/GMT", "Etc/GMT+0",
              "Etc/GMT+1", "Etc/GMT+10", "Etc/GMT+11", "Etc/GMT+12", "Etc/GMT+2", "Etc/GMT+3", "Etc/GMT+4", "Etc/GMT+5",
              "Etc/GMT+6", "Etc/GMT+7", "Etc/GMT+8", "Etc/GMT+9", "Etc/GMT-0", "Etc/GMT-1", "Etc/GMT-10", "Etc/GMT-11",
              "Etc/GMT-12", "Etc/GMT-13", "Etc/GMT-14", "Etc/GMT-2", "Etc/GMT-3", "Etc/GMT-4", "Etc/GMT-5", "Etc/GMT-6",
              "Etc/GMT-7", "Etc/GMT-8", "Etc/GMT-9", "Etc/GMT0", "Etc/Greenwich", "Etc/UCT", "Etc/UTC", "Etc/Universal",
              "Etc/Zulu", "Europe/Amsterdam", "Europe/Andorra", "Europe/Astrakhan", "Europe/Athens", "Europe/Belfast",
              "Europe/Belgrade", "Europe/Berlin", "Europe/Bratislava", "Europe/Brussels", "Europe/Bucharest",
              "Europe/Budapest", "Europe/Busingen", "Europe/Chisinau", "Europe/Copenhagen", "Europe/Dublin",
              "Europe/Gibraltar", "Europe/Guernsey", "Europe/Helsinki", "Europe/Isle_of_Man", "Europe/Istanbul",
              "Europe/Jersey", "Europe/Kaliningrad", "Europe/Kiev", "Europe/Kirov", "Europe/Kyiv", "Europe/Lisbon",
              "Europe/Ljubljana", "Europe/London", "Europe/Luxembourg", "Europe/Madrid", "Europe/Malta",
              "Europe/Mariehamn", "Europe/Minsk", "Europe/Monaco", "Europe/Moscow", "Europe/Nicosia", "Europe/Oslo",
              "Europe/Paris", "Europe/Podgorica", "Europe/Prague", "Europe/Riga", "Europe/Rome", "Europe/Samara",
              "Europe/San_Marino", "Europe/Sarajevo", "Europe/Saratov", "Europe/Simferopol", "Europe/Skopje",
              "Europe/Sofia", "Europe/Stockholm", "Europe/Tallinn", "Europe/Tirane", "Europe/Tiraspol",
              "Europe/Ulyanovsk", "Europe/Uzhgorod", "Europe/Vaduz", "Europe/Vatican", "Europe/Vienna",
              "Europe/Vilnius", "Europe/Volgograd", "Europe/Warsaw", "Europe/Zagreb", "Europe/Zaporozhye",
              "Europe/Zurich", "Factory", "GB", "GB-Eire", "GMT", "GMT+0", "GMT-0", "GMT0", "Greenwich", "HST",
              "Hongkong", "Iceland", "Indian/Antananarivo", "Indian/Chagos", "Indian/Christmas", "Indian/Cocos",
              "Indian/Comoro", "Indian/Kerguelen", "Indian/Mahe", "Indian/Maldives", "Indian/Mauritius",
              "Indian/Mayotte", "Indian/Reunion", "Iran", "Israel", "Jamaica", "Japan", "Kwajalein", "Libya", "MET",
              "MST", "MST7MDT", "Mexico/BajaNorte", "Mexico/BajaSur", "Mexico/General", "NZ", "NZ-CHAT", "Navajo",
              "PRC", "PST8PDT", "Pacific/Apia", "Pacific/Auckland", "Pacific/Bougainville", "Pacific/Chatham",
              "Pacific/Chuuk", "Pacific/Easter", "Pacific/Efate", "Pacific/Enderbury", "Pacific/Fakaofo",
              "Pacific/Fiji", "Pacific/Funafuti", "Pacific/Galapagos", "Pacific/Gambier", "Pacific/Guadalcanal",
              "Pacific/Guam", "Pacific/Honolulu", "Pacific/Johnston", "Pacific/Kanton", "Pacific/Kiritimati",
              "Pacific/Kosrae", "Pacific/Kwajalein", "Pacific/Majuro", "Pacific/Marquesas", "Pacific/Midway",
              "Pacific/Nauru", "Pacific/Niue", "Pacific/Norfolk", "Pacific/Noumea", "Pacific/Pago_Pago",
              "Pacific/Palau", "Pacific/Pitcairn", "Pacific/Pohnpei", "Pacific/Ponape", "Pacific/Port_Moresby",
              "Pacific/Rarotonga", "Pacific/Saipan", "Pacific/Samoa", "Pacific/Tahiti", "Pacific/Tarawa",
              "Pacific/Tongatapu", "Pacific/Truk", "Pacific/Wake", "Pacific/Wallis", "Pacific/Yap", "Poland",
              "Portugal", "ROC", "ROK", "Singapore", "Turkey", "UCT", "US/Alaska", "US/Aleutian", "US/Arizona",
              "US/Central", "US/East-Indiana", "US/Eastern", "US/Hawaii", "US/Indiana-Starke", "US/Michigan",
              "US/Mountain", "US/Pacific", "US/Samoa", "UTC", "Universal", "W-SU", "WET", "Zulu"
            ]
          },
          "Preferences": {
            "type": "object",
            "description": "The effective preferences (SPEC §7.1): the user's value where the app lets users override the field and the user set it, else the app default.",
            "required": ["groupPreferences", "oneOnOnePreferences", "mutePreferences", "usePrivacyTemplate", "timezone"],
            "properties": {
              "groupPreferences": {
                "type": "object",
                "required": [
                  "messages", "replies", "quotedReplies", "reactions", "memberLeft", "memberAdded", "memberJoined",
                  "memberKicked", "memberBanned", "memberUnbanned", "memberScopeChanged"
                ],
                "properties": {
                  "messages": {"$ref": "\u0023/components/schemas/MessagesChoice"},
                  "replies": {"$ref": "\u0023/components/schemas/RepliesChoice"},
                  "quotedReplies": {"$ref": "\u0023/components/schemas/QuotedRepliesChoice"},
                  "reactions": {"$ref": "\u0023/components/schemas/ReactionsChoice"},
                  "memberLeft": {"$ref": "\u0023/components/schemas/MemberChoice"},
                  "memberAdded": {"$ref": "\u0023/components/schemas/MemberChoice"},
                  "memberJoined": {"$ref": "\u0023/components/schemas/MemberChoice"},
                  "memberKicked": {"$ref": "\u0023/components/schemas/MemberChoice"},
                  "memberBanned": {"$ref": "\u0023/components/schemas/MemberChoice"},
                  "memberUnbanned": {"$ref": "\u0023/components/schemas/MemberChoice"},
                  "memberScopeChanged": {"$ref": "\u0023/components/schemas/MemberChoice"}
                }
              },
              "oneOnOnePreferences": {
                "type": "object",
                "required": ["messages", "replies", "quotedReplies", "reactions"],
                "properties": {
                  "messages": {"$ref": "\u0023/components/schemas/MessagesChoice"},
                  "replies": {"$ref": "\u0023/components/schemas/RepliesChoice"},
                  "quotedReplies": {"$ref": "\u0023/components/schemas/QuotedRepliesChoice"},
                  "reactions": {"$ref": "\u0023/components/schemas/ReactionsChoice"}
                }
              },
              "mutePreferences": {
                "type": "object",
                "required": ["dnd", "schedule"],
                "properties": {
                  "dnd": {"$ref": "\u0023/components/schemas/DndChoice"},
                  "schedule": {"$ref": "\u0023/components/schemas/Schedule"}
                }
              },
              "usePrivacyTemplate": {"type": "boolean"},
              "timezone": {"type": "string", "description": "IANA time zone name."}
            }
          },
          "PreferencesPatch": {
            "type": "object",
            "additionalProperties": false,
            "description": "Fields to merge; any subset. Unknown fields, wrong JSON types and invalid values are 400 ERR_INVALID_PREFERENCE (params.field names the path) and nothing is saved. Fields the app does not let users override are accepted and ignored.",
            "properties": {
              "groupPreferences": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                  "messages": {"$ref": "\u0023/components/schemas/MessagesChoiceInput"},
                  "replies": {"$ref": "\u0023/components/schemas/RepliesChoiceInput"},
                  "quotedReplies": {"$ref": "\u0023/components/schemas/QuotedRepliesChoiceInput"},
                  "reactions": {"$ref": "\u0023/components/schemas/ReactionsChoiceInput"},
                  "memberLeft": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                  "memberAdded": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                  "memberJoined": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                  "memberKicked": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                  "memberBanned": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                  "memberUnbanned": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                  "memberScopeChanged": {"$ref": "\u0023/components/schemas/MemberChoiceInput"}
                }
              },
              "oneOnOnePreferences": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                  "messages": {"$ref": "\u0023/components/schemas/MessagesChoiceInput"},
                  "replies": {"$ref": "\u0023/components/schemas/RepliesChoiceInput"},
                  "quotedReplies": {"$ref": "\u0023/components/schemas/QuotedRepliesChoiceInput"},
                  "reactions": {"$ref": "\u0023/components/schemas/ReactionsChoiceInput"}
                }
              },
              "mutePreferences": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                  "dnd": {"$ref": "\u0023/components/schemas/DndChoiceInput"},
                  "schedule": {"$ref": "\u0023/components/schemas/SchedulePatch"}
                }
              },
              "usePrivacyTemplate": {"type": "boolean"},
              "timezone": {"$ref": "\u0023/components/schemas/TimeZone"}
            }
          },
          "Settings": {
            "type": "object",
            "description": "The app's notification settings (SPEC §7.2): each user-level field as `{value, userCanOverride}`, plus the app switches as bare values.",
            "required": [
              "groupPreferences", "oneOnOnePreferences", "mutePreferences", "usePrivacyTemplate", "timezone",
              "bypassPreferencesForMentions", "bypassPreferencesForAll", "privacyTemplateMode", "largeGroupThreshold"
            ],
            "properties": {
              "groupPreferences": {
                "type": "object",
                "required": [
                  "messages", "replies", "quotedReplies", "reactions", "memberLeft", "memberAdded", "memberJoined",
                  "memberKicked", "memberBanned", "memberUnbanned", "memberScopeChanged"
                ],
                "properties": {
                  "messages": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MessagesChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "replies": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/RepliesChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "quotedReplies": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/QuotedRepliesChoice"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "reactions": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/ReactionsChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "memberLeft": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MemberChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "memberAdded": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MemberChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "memberJoined": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MemberChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "memberKicked": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MemberChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "memberBanned": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MemberChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "memberUnbanned": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MemberChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "memberScopeChanged": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MemberChoice"}, "userCanOverride": {"type": "boolean"}}
                  }
                }
              },
              "oneOnOnePreferences": {
                "type": "object",
                "required": ["messages", "replies", "quotedReplies", "reactions"],
                "properties": {
                  "messages": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/MessagesChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "replies": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/RepliesChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "quotedReplies": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/QuotedRepliesChoice"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "reactions": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/ReactionsChoice"}, "userCanOverride": {"type": "boolean"}}
                  }
                }
              },
              "mutePreferences": {
                "type": "object",
                "required": ["dnd", "schedule"],
                "properties": {
                  "dnd": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/DndChoice"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "schedule": {
                    "type": "object",
                    "required": ["value", "userCanOverride"],
                    "properties": {"value": {"$ref": "\u0023/components/schemas/Schedule"}, "userCanOverride": {"type": "boolean"}}
                  }
                }
              },
              "usePrivacyTemplate": {
                "type": "object",
                "required": ["value", "userCanOverride"],
                "properties": {"value": {"type": "boolean"}, "userCanOverride": {"type": "boolean"}}
              },
              "timezone": {
                "type": "object",
                "required": ["value", "userCanOverride"],
                "properties": {
                  "value": {"type": "string", "description": "IANA time zone name."},
                  "userCanOverride": {"type": "boolean"}
                }
              },
              "bypassPreferencesForMentions": {"type": "boolean"},
              "bypassPreferencesForAll": {"type": "boolean"},
              "privacyTemplateMode": {"type": "string", "enum": ["DEFAULT", "PRIVACY", "USER_CHOICE"]},
              "largeGroupThreshold": {"type": "integer", "minimum": 1, "maximum": 1000000}
            }
          },
          "SettingsPatch": {
            "type": "object",
            "additionalProperties": false,
            "description": "Fields to merge; any subset. Unknown fields, wrong JSON types and invalid values are 400 ERR_INVALID_PREFERENCE (params.field names the path) and nothing is saved.",
            "properties": {
              "groupPreferences": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                  "messages": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MessagesChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "replies": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/RepliesChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "quotedReplies": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/QuotedRepliesChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "reactions": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/ReactionsChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "memberLeft": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "memberAdded": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "memberJoined": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "memberKicked": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "memberBanned": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "memberUnbanned": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "memberScopeChanged": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MemberChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  }
                }
              },
              "oneOnOnePreferences": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                  "messages": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/MessagesChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "replies": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/RepliesChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "quotedReplies": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/QuotedRepliesChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  },
                  "reactions": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                      "value": {"$ref": "\u0023/components/schemas/ReactionsChoiceInput"},
                      "userCanOverride": {"type": "boolean"}
                    }
                  }
                }
              },
              "mutePreferences": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                  "dnd": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {"value": {"$ref": "\u0023/components/schemas/DndChoiceInput"}, "userCanOverride": {"type": "boolean"}}
                  },
                  "schedule": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {"value": {"$ref": "\u0023/components/schemas/SchedulePatch"}, "userCanOverride": {"type": "boolean"}}
                  }
                }
              },
              "usePrivacyTemplate": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"value": {"type": "boolean"}, "userCanOverride": {"type": "boolean"}}
              },
              "timezone": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"value": {"$ref": "\u0023/components/schemas/TimeZone"}, "userCanOverride": {"type": "boolean"}}
              },
              "bypassPreferencesForMentions": {"type": "boolean"},
              "bypassPreferencesForAll": {"type": "boolean"},
              "privacyTemplateMode": {"type": "string", "enum": ["DEFAULT", "PRIVACY", "USER_CHOICE"]},
              "largeGroupThreshold": {"type": "integer", "minimum": 1, "maximum": 1000000}
            }
          },
          "Mute": {
            "type": "object",
            "required": ["id", "type", "until"],
            "properties": {
              "id": {"type": "string", "description": "The guid, or the other user's uid for a one-on-one chat."},
              "type": {"type": "string", "enum": ["group", "oneOnOne"]},
              "until": {"type": "integer", "description": "Epoch ms; only mutes in the future are listed."}
            }
          },
          "Mutes": {
            "type": "object",
            "required": ["conversations"],
            "properties": {"conversations": {"type": "array", "items": {"$ref": "\u0023/components/schemas/Mute"}}}
          },
          "MuteId": {
            "type": ["string", "integer"],
            "description": "The guid, or the other user's uid. An opaque id (SPEC §1): 1-128 characters (Unicode scalars), no control characters (U+0000-U+001F, U+007F-U+009F), no '/'. A JSON integer means its decimal string.",
            "minLength": 1,
            "maxLength": 128,
            "pattern": "^[^/\\u0000-\\u001F\\u007F-\\u009F]+$",
            "minimum": -9999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999,
            "maximum": 99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999
          },
          "MutesPut": {
            "type": "object",
            "required": ["conversations"],
            "properties": {
              "conversations": {
                "type": "array",
                "items": {
                  "type": "object",
                  "required": ["id", "type", "until"],
                  "properties": {
                    "id": {"$ref": "\u0023/components/schemas/MuteId"},
                    "type": {"type": "string", "enum": ["group", "oneOnOne"]},
                    "until": {
                      "type": "integer",
                      "maximum": 9223372036854775807,
                      "description": "Epoch ms; must be in the future, else 400 ERR_INVALID_PREFERENCE."
                    }
                  }
                }
              }
            }
          },
          "MutesDelete": {
            "type": "object",
            "required": ["conversations"],
            "properties": {
              "conversations": {
                "type": "array",
                "items": {
                  "type": "object",
                  "required": ["id", "type"],
                  "properties": {
                    "id": {"$ref": "\u0023/components/schemas/MuteId"},
                    "type": {"type": "string", "enum": ["group", "oneOnOne"]}
                  }
                }
              }
            }
          },
          "RoutingDecision": {
            "type": "object",
            "required": ["notified", "reason", "jobId", "steps"],
            "properties": {
              "notified": {"type": "boolean"},
              "reason": {
                "type": "string",
                "description": "When notified, the job's reason (`mention`, `mentionAll`, `quote`, `subscribedThread`, `allReplies`, `allMessages`); else the skip code (`SENDER`, `NO_ACCESS`, `CUSTOM_MESSAGE`, `MESSAGES_PREFERENCE`, `REPLIES_PREFERENCE`, `UNSUBSCRIBED`, `MUTE_PREFERENCE`, `DND_PREFERENCE`, `SCHEDULE_PREFERENCE`)."
              },
              "jobId": {"type": ["string", "null"]},
              "steps": {"type": "array", "items": {"type": "string"}}
            }
          },
          "JobId": {"type": "string", "pattern": "^j[1-9][0-9]{0,17}$", "description": "`j` and a positive integer."},
          "Job": {
            "type": "object",
            "required": ["id", "attempt", "app", "recipient", "createdAt", "event", "kind", "reason", "notification", "data"],
            "properties": {
              "id": {"type": "string", "pattern": "^j[0-9]+$"},
              "attempt": {"type": "integer", "minimum": 0},
              "app": {"type": "string"},
              "recipient": {"type": "string"},
              "createdAt": {"type": "integer"},
              "event": {
                "type": "object",
                "required": ["source", "id", "type"],
                "properties": {"source": {"type": "string"}, "id": {"type": "string"}, "type": {"type": "string"}}
              },
              "kind": {"type": "string", "enum": ["message", "reply"]},
              "reason": {
                "type": "string",
                "description": "`mention`, `mentionAll`, `quote`, `subscribedThread`, `allReplies` or `allMessages`."
              },
              "notification": {
                "type": ["object", "null"],
                "properties": {
                  "title": {"type": "string"},
                  "body": {"type": "string"},
                  "tag": {"type": "string"},
                  "collapseId": {"type": "string"},
                  "badge": {"type": "integer"}
                }
              },
              "data": {
                "type": ["object", "null"],
                "properties": {
                  "messageId": {"type": "string"},
                  "parentMessageId": {"type": ["string", "null"]},
                  "conversationId": {"type": "string"},
                  "receiverType": {"type": "string"},
                  "receiver": {"type": "string"},
                  "sender": {"type": "string"},
                  "sentAt": {"type": "integer"}
                }
              }
            }
          },
          "DeadJob": {
            "allOf": [{"$ref": "\u0023/components/schemas/Job"}],
            "type": "object",
            "required": ["lastError"],
            "properties": {"lastError": {"type": ["string", "null"]}}
          },
          "Claim": {
            "type": "object",
            "description": "All fields optional (null means the default); the body itself may be empty.",
            "properties": {
              "max": {"type": ["integer", "null"], "minimum": 1, "maximum": 1000, "default": 100},
              "leaseSeconds": {"type": ["integer", "null"], "minimum": 1, "maximum": 3600, "default": 30},
              "waitSeconds": {
                "type": ["integer", "null"],
                "minimum": 0,
                "maximum": 30,
                "default": 0,
                "description": "Long poll: with no job ready, wait up to this long for one."
              }
            }
          },
          "Jobs": {
            "type": "object",
            "required": ["jobs"],
            "properties": {"jobs": {"type": "array", "items": {"$ref": "\u0023/components/schemas/Job"}}}
          },
          "AckBody": {
            "type": "object",
            "required": ["jobs"],
            "properties": {
              "jobs": {
                "type": "array",
                "maxItems": 1000,
                "items": {
                  "type": "object",
                  "required": ["id", "attempt"],
                  "properties": {
                    "id": {"$ref": "\u0023/components/schemas/JobId"},
                    "attempt": {"type": "integer", "minimum": 1, "maximum": 2147483647}
                  }
                }
              }
            }
          },
          "FailBody": {
            "type": "object",
            "required": ["jobs"],
            "properties": {
              "jobs": {
                "type": "array",
                "maxItems": 1000,
                "items": {
                  "type": "object",
                  "required": ["id", "attempt"],
                  "properties": {
                    "id": {"$ref": "\u0023/components/schemas/JobId"},
                    "attempt": {"type": "integer", "minimum": 1, "maximum": 2147483647},
                    "error": {
                      "description": "What went wrong: a string, kept (first 2000 characters) as the job's lastError; any other JSON value is ignored."
                    },
                    "retryable": {"type": ["boolean", "null"], "default": true},
                    "retryAfterSeconds": {
                      "type": ["integer", "null"],
                      "minimum": 0,
                      "maximum": 86400,
                      "description": "Default: exponential backoff with jitter (base 1 s, cap 5 min)."
                    }
                  }
                }
              }
            }
          },
          "AckResult": {
            "type": "object",
            "required": ["acked", "stale"],
            "properties": {"acked": {"type": "integer", "minimum": 0}, "stale": {"type": "array", "items": {"type": "string"}}}
          },
          "FailResult": {
            "type": "object",
            "required": ["retrying", "dead", "stale"],
            "properties": {
              "retrying": {"type": "integer", "minimum": 0},
              "dead": {"type": "integer", "minimum": 0},
              "stale": {"type": "array", "items": {"type": "string"}}
            }
          },
          "JobStats": {
            "type": "object",
            "required": ["ready", "leased", "retrying", "dead", "oldestReadyAgeMs"],
            "properties": {
              "ready": {"type": "integer", "minimum": 0},
              "leased": {"type": "integer", "minimum": 0},
              "retrying": {"type": "integer", "minimum": 0},
              "dead": {"type": "integer", "minimum": 0},
              "oldestReadyAgeMs": {"type": "integer", "minimum": 0}
            }
          },
          "RequeueBody": {
            "type": "object",
            "required": ["ids"],
            "properties": {"ids": {"type": "array", "maxItems": 1000, "items": {"$ref": "\u0023/components/schemas/JobId"}}}
          },
          "Requeued": {"type": "object", "required": ["requeued"], "properties": {"requeued": {"type": "integer", "minimum": 0}}},
          "MessagesChoice": {"type": "string", "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS"]},
          "MessagesChoiceInput": {
            "description": "An enum name, or its CometChat integer code (1 = DONT_SUBSCRIBE … 3 = SUBSCRIBE_TO_MENTIONS).",
            "anyOf": [
              {"type": "string", "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS"]},
              {"type": "integer", "minimum": 1, "maximum": 3}
            ]
          },
          "RepliesChoice": {
            "type": "string",
            "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS", "SUBSCRIBE_TO_SUBSCRIBED_THREADS"]
          },
          "RepliesChoiceInput": {
            "description": "An enum name, or its CometChat integer code (1 = DONT_SUBSCRIBE … 4 = SUBSCRIBE_TO_SUBSCRIBED_THREADS).",
            "anyOf": [
              {
                "type": "string",
                "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS", "SUBSCRIBE_TO_SUBSCRIBED_THREADS"]
              },
              {"type": "integer", "minimum": 1, "maximum": 4}
            ]
          },
          "QuotedRepliesChoice": {
            "type": "string",
            "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS", "SUBSCRIBE_TO_QUOTES_ON_OWN_MESSAGES"]
          },
          "QuotedRepliesChoiceInput": {
            "description": "An enum name, or its CometChat integer code (1 = DONT_SUBSCRIBE … 4 = SUBSCRIBE_TO_QUOTES_ON_OWN_MESSAGES).",
            "anyOf": [
              {
                "type": "string",
                "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_ALL", "SUBSCRIBE_TO_MENTIONS", "SUBSCRIBE_TO_QUOTES_ON_OWN_MESSAGES"]
              },
              {"type": "integer", "minimum": 1, "maximum": 4}
            ]
          },
          "ReactionsChoice": {
            "type": "string",
            "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES", "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"]
          },
          "ReactionsChoiceInput": {
            "description": "An enum name, or its CometChat integer code (1 = DONT_SUBSCRIBE … 3 = SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES).",
            "anyOf": [
              {
                "type": "string",
                "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES", "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"]
              },
              {"type": "integer", "minimum": 1, "maximum": 3}
            ]
          },
          "MemberChoice": {"type": "string", "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE"]},
          "MemberChoiceInput": {
            "description": "An enum name, or its CometChat integer code (1 = DONT_SUBSCRIBE … 2 = SUBSCRIBE).",
            "anyOf": [
              {"type": "string", "enum": ["DONT_SUBSCRIBE", "SUBSCRIBE"]},
              {"type": "integer", "minimum": 1, "maximum": 2}
            ]
          },
          "DndChoice": {"type": "string", "enum": ["DISABLED", "ENABLED"]},
          "DndChoiceInput": {
            "description": "An enum name, or its CometChat integer code (1 = DISABLED … 2 = ENABLED).",
            "anyOf": [{"type": "string", "enum": ["DISABLED", "ENABLED"]}, {"type": "integer", "minimum": 1, "maximum": 2}]
          }
        }
      }
    }
    """#
}
