// The .rw rule language. The parser is generated at build time by Debian's antlr4 tool.
// Rule names avoid the C++ runtime's own names (no `rule`). Nesting is bounded before parsing
// (dsl/parse.cpp), so the recursive rules below never recurse deeply.
grammar RW;

// ---- line-sensitive calls: a call's '(' is on its callee's line, so a rule ending in a name
// (`=> x`) and a next rule starting with '(' (`(Add|Mul)[y, 0] => y`) stay two rules.
@parser::members {
  bool sameLine() { return _input->LT(1)->getLine() == _input->LT(-1)->getLine(); }
  // a rule name: `name: ` (whitespace after the colon) at the start of a rule; `x:Const` is a
  // capture chain
  bool spacedColon() {
    return _input->LT(2)->getText() == ":" &&
           _input->LT(3)->getStartIndex() > _input->LT(2)->getStopIndex() + 1;
  }
}

file: decl* EOF;

decl
  : 'include' STRING                                   # includeDecl
  | 'opgroup' ID '=' ID ('|' ID)*                      # opgroupDecl
  | 'ruleset' ID '{' member* '}'                       # rulesetBlock
  | 'ruleset' ID '=' ID ('+' ID)*                      # rulesetCompose
  | 'gradient' ID '{' member* '}'                      # gradientBlock
  | 'verifier' ID '{' member* '}'                      # verifierBlock
  | externFn                                           # externDecl
  | defDecl                                            # defDeclaration
  ;

// ---- declared helpers: `extern fn name(a: int, b: uop) -> bool` (a C++ helper's signature)
externFn: 'extern' 'fn' ID '(' (externParam (',' externParam)*)? ')' '->' ID;
externParam: ID ':' ID;

// `def name(params) = expr`: a pure function over values, callable from every expression. A
// parameter may be typed (`x: uop`, the type names of `extern fn`).
defDecl: 'def' ID '(' (defParam (',' defParam)*)? ')' '=' expr;
defParam: ID (':' type=ID)?;

member
  : ({spacedColon()}? ruleName=ID ':')? pattern clause* '=>' expr  # ruleMember
  | 'use' ID                                           # useMember
  | 'for' ID 'in' '(' ID (',' ID)* ')' '{' member* '}' # forMember
  ;

clause
  : 'if' expr                                          # guardClause
  | 'let' ID '=' expr                                  # letClause
  | requireCall                                        # requireClause
  ;
// `require(cond, "why")`: the verifier rule fails with "why" where cond is false (a clause, or
// the whole result of a verifier rule).
requireCall: 'require' '(' expr ',' STRING ')';

// ---- patterns
pattern: alternative ('||' alternative)*;
alternative: constraint (':' constraint)*;
constraint
  : opHead (sources | commSources)? argMatch?          # opConstraint
  | '(' pattern ')'                                    # groupConstraint
  | neg='-'? literal                                   # literalConstraint
  | '_'                                                # wildcardConstraint
  ;
opHead
  : ID ('|' ID)* optional='?'?
  | '(' ID ('|' ID)* ')' optional='?'?
  ;
sources: '(' (source (',' source)*)? ')';
commSources: '[' (source (',' source)*)? ']';
source
  : pattern repeat='*'?                                # patternSource
  | '...'                                              # restSource
  ;
argMatch: '{' argPattern '}';
argPattern
  : neg='-'? literal                                   # literalArg
  | ID                                                 # nameArg
  | '_'                                                # anyArg
  | '(' (argPattern (',' argPattern)*)? ','? ')'       # tupleArg
  ;

// ---- expressions (guards, lets and results)
// `a if c else b` (Python's conditional, lowest precedence, only the chosen branch evaluated).
// A chain `a if c else b if d else e` nests to the right; it is a loop here, so the parser does
// not recurse per link. After a `let` or guard expression, an `if` starts a conditional only when
// its `else` follows; otherwise it is the next guard.
expr: orExpr ('if' orExpr 'else' orExpr)*;
orExpr: andExpr ('||' andExpr)*;
andExpr: notExpr ('&&' notExpr)*;
notExpr: bang+='!'* compareExpr;
compareExpr: bitOrExpr (compareOp bitOrExpr)?;
compareOp: '==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not' 'in';
bitOrExpr: bitXorExpr ('|' bitXorExpr)*;
bitXorExpr: bitAndExpr ('^' bitAndExpr)*;
bitAndExpr: shiftExpr ('&' shiftExpr)*;
shiftExpr: addExpr (shiftOp addExpr)*;
shiftOp: '<<' | '>>';
addExpr: mulExpr (addOp mulExpr)*;
addOp: '+' | '-';
mulExpr: unaryExpr (mulOp unaryExpr)*;
mulOp: '*' | '//' | '%' | '/';
unaryExpr: unaryOp* postfixExpr;
unaryOp: '-' | '~';
postfixExpr: primaryExpr postfixOp*;
postfixOp
  : '.' ID ({sameLine()}? callArgs)?                   # memberOp
  | '[' expr ']'                                       # indexOp
  | '[' lo=expr? ':' hi=expr? (':' step=expr?)? ']'    # sliceOp
  ;
primaryExpr
  : literal                                            # literalExpr
  | ID ({sameLine()}? callArgs)?                       # nameExpr
  | requireCall                                        # requireExpr
  | '(' ')'                                            # emptyTupleExpr
  | '(' expr ')'                                       # parenExpr
  | '(' expr ',' (expr (',' expr)*)? ','? ')'          # tupleExpr
  | '[' (expr (',' expr)* ','?)? ']'                   # listExpr
  | '[' expr compClause+ ']'                           # listCompExpr
  | '(' expr compClause+ ')'                           # genExpr
  ;
callArgs
  : '(' (callArg (',' callArg)*)? ','? ')'
  | '(' expr compClause+ ')'  // f(x for x in t): one generator argument
  ;

// Comprehensions: `[e for a, (b, _) in zip(s, t) if c]`; the value is a tuple.
compClause
  : 'for' target 'in' orExpr                           # compFor
  | 'if' orExpr                                        # compIf
  ;
target: targetItem (',' targetItem)*;
targetItem
  : ID                                                 # nameTarget
  | '_'                                                # discardTarget
  | '(' target trailing=','? ')'                       # tupleTarget
  ;
callArg: (ID ':')? expr;

literal: INT | FLOAT | STRING | 'True' | 'False' | 'none' | 'inf' | 'nan';

// ---- tokens
INT: [0-9]+ | '0x' [0-9a-fA-F]+;
FLOAT: [0-9]+ '.' [0-9]* ([eE] [+-]? [0-9]+)? | [0-9]+ [eE] [+-]? [0-9]+;
STRING: '"' (~["\\\r\n] | '\\' ~[\r\n])* '"';
ID: [a-zA-Z_] [a-zA-Z_0-9]*;
LINE_COMMENT: '#' ~[\r\n]* -> skip;  // '//' is floor division
BLOCK_COMMENT: '/*' .*? '*/' -> skip;
WS: [ \t\r\n]+ -> skip;
// Anything else is one bad character, reported by the parser with its location.
UNKNOWN: .;
