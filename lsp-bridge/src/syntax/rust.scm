; Definitions that tree-sitter-rust's bundled tags query leaves out.
; The bundled query is run first; these patterns are appended to it.

(const_item
    name: (identifier) @name) @definition.constant

(static_item
    name: (identifier) @name) @definition.variable

; Trait methods without a default body.
(function_signature_item
    name: (identifier) @name) @definition.method

(associated_type
    name: (type_identifier) @name) @definition.type

(field_declaration
    name: (field_identifier) @name) @definition.field
