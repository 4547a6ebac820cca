#include "dtsim/gui/timeline_pane.hpp"

#include <QApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QVBoxLayout>

namespace dtsim::gui {

TimelinePane::TimelinePane(QWidget* parent) : QWidget(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->setSpacing(4);

    auto* bar = new QHBoxLayout;
    title_ = new QLabel(this);
    QFont bold = title_->font();
    bold.setBold(true);
    title_->setFont(bold);
    search_ = new QLineEdit(this);
    search_->setPlaceholderText(tr("Search span names ( / )"));
    search_->setClearButtonEnabled(true);
    search_->setMinimumWidth(220);
    search_->setMaximumWidth(300);
    auto* previous = new QPushButton(QStringLiteral("\u25c0"), this);
    previous->setToolTip(tr("Previous match (Shift+N, Shift+Enter)"));
    auto* next = new QPushButton(QStringLiteral("\u25b6"), this);
    next->setToolTip(tr("Next match (N, Enter)"));
    for (auto* b : {previous, next}) b->setMaximumWidth(32);
    matches_ = new QLabel(this);
    auto* fit = new QPushButton(tr("Fit all (F)"), this);
    auto* hint = new QLabel(tr("wheel: zoom   drag: pan   W/S A/D   click: select"), this);
    hint->setEnabled(false);
    hint->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // the first to give way in a narrow window
    bar->addWidget(title_, 1);
    bar->addWidget(hint);
    bar->addWidget(search_);
    bar->addWidget(matches_);
    bar->addWidget(previous);
    bar->addWidget(next);
    bar->addWidget(fit);
    layout->addLayout(bar);

    auto* split = new QSplitter(Qt::Horizontal, this);
    view_ = new TimelineView(split);
    details_ = new QPlainTextEdit(split);
    details_->setReadOnly(true);
    details_->setPlaceholderText(tr("Click a span to see its details."));
    details_->setMinimumWidth(180);
    split->addWidget(view_);
    split->addWidget(details_);
    split->setStretchFactor(0, 5);
    split->setStretchFactor(1, 1);
    split->setSizes({1000, 240});
    layout->addWidget(split, 1);

    connect(search_, &QLineEdit::textChanged, this, [this](const QString& text) {
        view_->set_search(text);  // the view's legend counts the matches
        show_match_position();
    });
    // Enter steps to the next match and Shift+Enter to the previous one; the box keeps the focus.
    connect(search_, &QLineEdit::returnPressed, this,
            [this] { step_match(QApplication::keyboardModifiers() & Qt::ShiftModifier ? -1 : 1); });
    connect(previous, &QPushButton::clicked, this, [this] { step_match(-1); });
    connect(next, &QPushButton::clicked, this, [this] { step_match(1); });
    connect(view_, &TimelineView::span_selected, this, [this] { show_match_position(); });
    connect(view_, &TimelineView::search_requested, search_, [this] {
        search_->setFocus();
        search_->selectAll();
    });
    connect(view_, &TimelineView::span_selected, this, &TimelinePane::show_details);
    connect(fit, &QPushButton::clicked, view_, &TimelineView::fit_all);
}

void TimelinePane::set_index(std::shared_ptr<const TimelineIndex> index) {
    view_->set_index(std::move(index));
    if (!search_->text().isEmpty()) view_->set_search(search_->text());
    details_->clear();
}

void TimelinePane::set_title(const QString& title) { title_->setText(title); }

void TimelinePane::step_match(int direction) {
    view_->step_match(direction);
    show_match_position();
}

void TimelinePane::show_match_position() {
    if (search_->text().isEmpty())
        matches_->clear();
    else if (view_->match_count() == 0)
        matches_->setText(tr("no match"));
    else if (view_->match_position() == 0)
        matches_->setText(tr("%1 matches").arg(view_->match_count()));
    else
        matches_->setText(tr("%1 of %2").arg(view_->match_position()).arg(view_->match_count()));
}

QString TimelinePane::match_text() const {
    return matches_->text();
}

QString TimelinePane::details_text() const { return details_->toPlainText(); }

void TimelinePane::show_details(std::int32_t span) {
    if (span < 0 || !view_->index()) {
        details_->clear();
        return;
    }
    details_->setPlainText(span_description(*view_->index(), span));
}

}  // namespace dtsim::gui
