; Definitions that tree-sitter-typescript's bundled tags query leaves out.
; Appended after the JavaScript and TypeScript bundled queries, for TypeScript and TSX.

(enum_declaration
    name: (identifier) @name) @definition.enum

(type_alias_declaration
    name: (type_identifier) @name) @definition.type

; `namespace Foo {}`; the bundled query covers only `module Foo {}`.
(internal_module
    name: (_) @name) @definition.module

(public_field_definition
    name: (property_identifier) @name) @definition.field

; Interface members only: an object type in a parameter list is not a definition.
(interface_body
    (property_signature
        name: (property_identifier) @name) @definition.field)
